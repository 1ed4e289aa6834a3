/* Placeholder until the vulkan binding lands. */
#include "lbert.h"

void lbert_open_vulkan(lua_State *L) { (void)L; }
