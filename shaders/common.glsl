// Shared helpers for the compute shaders (included with GL_GOOGLE_include_directive).
// Buffers are declared as uint[] so that one shader reads float32 and int32 alike.

float erf_approx(float x) {
  // Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7)
  float s = sign(x), a = abs(x);
  float t = 1.0 / (1.0 + 0.3275911 * a);
  float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-a * a);
  return s * y;
}

float gelu_erf(float x) { return 0.5 * x * (1.0 + erf_approx(x * 0.70710678118654752)); }

float gelu_tanh(float x) {
  float u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + tanh(clamp(u, -15.0, 15.0)));
}

float gelu_erf_grad(float x) {
  float cdf = 0.5 * (1.0 + erf_approx(x * 0.70710678118654752));
  float pdf = 0.3989422804014327 * exp(-0.5 * x * x);
  return cdf + x * pdf;
}

float gelu_tanh_grad(float x) {
  float u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
  float th = tanh(clamp(u, -15.0, 15.0));
  float du = 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
  return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du;
}

// linear workgroup index over a 2-D grid (grids wider than 65535 groups)
uint group_linear() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }
