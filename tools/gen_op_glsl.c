/*
** Writes the GLSL opcodes of the elementwise ops from the op list
** (csrc/core/op_list.h) and the Vulkan opcode bases (csrc/vulkan/
** vk_opcodes.h): build/gen/bert_ops.glsl, included by shaders/eltwise.comp.
** Run by the Makefile: cc -Icsrc tools/gen_op_glsl.c && ./a.out > bert_ops.glsl
*/
#include <stdio.h>

#include "core/op_list.h"
#include "vulkan/vk_opcodes.h"

int main(void) {
  unsigned k;
  printf("// Generated from csrc/core/op_list.h by tools/gen_op_glsl.c: do not edit.\n");
  k = 0;
#define X(ID, name, cmp) printf("#define OP_%s %uu\n", #ID, k++);
  BERT_BINARY_OPS(X)
#undef X
  k = 0;
#define X(ID, name, keeps_int) printf("#define UN_%s %uu\n#define UNB_%s %uu\n", #ID, ELT_UNARY + k, #ID, \
                                      ELT_UNARY_GRAD + k), k++;
  BERT_UNARY_OPS(X)
#undef X
  return 0;
}
