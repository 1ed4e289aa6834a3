/* Placeholder until the tokenizer binding lands. */
#include "lbert.h"

void lbert_open_tokenizer(lua_State *L) { (void)L; }
