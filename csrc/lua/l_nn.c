/* Placeholder until the nn binding lands. */
#include "lbert.h"

void lbert_open_nn(lua_State *L) { (void)L; }
