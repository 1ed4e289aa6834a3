/* Placeholder until the data binding lands. */
#include "lbert.h"

void lbert_open_data(lua_State *L) { (void)L; }
