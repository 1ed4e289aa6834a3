/* Placeholder until the optim binding lands. */
#include "lbert.h"

void lbert_open_optim(lua_State *L) { (void)L; }
