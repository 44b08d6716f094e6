// The cells of the recurrent layers (lib/layers/recurrent.h), one element (sample b, unit j) of one
// step, written once for the CPU and CUDA kernels. Pre-activations come in with every bias added
// (gru: hn = h_{t-1} W_hn^T + b_hn, the product that the reset gate scales, separately).
// Backward takes the stored activated gates and states, the gradient dh reaching h_t (from the
// output and from step t + 1), and returns the gradients of the pre-activations.
#pragma once

#include <cmath>

#include "lib/core/host_device.h"

namespace trainer {

// The activations: libm's (the CUDA kernels), or any type with the same two static functions
// (the CPU kernels' vectorizable ones, kernels/cpu/vector_math.h). T: float, or a vector of floats
// (GCC's vector extension) on the CPU, four units at a time.
struct LibmActivations {
  static TRAINER_HD float sigmoid(float a) { return 1.f / (1.f + expf(-a)); }
  static TRAINER_HD float tanh(float x) { return tanhf(x); }
};

// lstm: gates i, f, g, o from their pre-activations; c = f c_prev + i g, h = o tanh(c).
template <class Act = LibmActivations, class T = float>
TRAINER_HD_INLINE void lstm_cell_forward(T ai, T af, T ag, T ao, T c_prev, T* gate, T& c, T& h) {
  const T i = Act::sigmoid(ai), f = Act::sigmoid(af), g = Act::tanh(ag), o = Act::sigmoid(ao);
  gate[0] = i;
  gate[1] = f;
  gate[2] = g;
  gate[3] = o;
  c = f * c_prev + i * g;
  h = o * Act::tanh(c);
}

// dc: in, the gradient reaching c_t from step t + 1 (f_{t+1} dc_{t+1}); out, the one for c_{t-1}.
// da: the gradients of the four pre-activations.
template <class Act = LibmActivations, class T = float>
TRAINER_HD_INLINE void lstm_cell_backward(const T* gate, T c, T c_prev, T dh, T& dc, T* da) {
  const T i = gate[0], f = gate[1], g = gate[2], o = gate[3];
  const T tc = Act::tanh(c);
  const T dct = dc + dh * o * (1.f - tc * tc);
  da[0] = dct * g * i * (1.f - i);
  da[1] = dct * c_prev * f * (1.f - f);
  da[2] = dct * i * (1.f - g * g);
  da[3] = dh * tc * o * (1.f - o);
  dc = dct * f;
}

// gru (PyTorch's form, the reset gate applied after the hidden product): xr, xz, xn = x W_i^T +
// b_i; hr, hz = h_{t-1} W_h{r,z}^T + b_h{r,z}; hn = h_{t-1} W_hn^T + b_hn.
template <class Act = LibmActivations, class T = float>
TRAINER_HD_INLINE void gru_cell_forward(T xr, T xz, T xn, T hr, T hz, T hn, T h_prev, T* gate, T& h) {
  const T r = Act::sigmoid(xr + hr), z = Act::sigmoid(xz + hz), n = Act::tanh(xn + r * hn);
  gate[0] = r;
  gate[1] = z;
  gate[2] = n;
  h = (1.f - z) * n + z * h_prev;
}

// dax: the gradients of xr, xz, xn (the input side); dah: of hr, hz, hn (the hidden side);
// dh_prev: the part of h_{t-1}'s gradient that does not go through W_hh (z dh).
template <class T = float>
TRAINER_HD_INLINE void gru_cell_backward(const T* gate, T hn, T h_prev, T dh, T* dax, T* dah, T& dh_prev) {
  const T r = gate[0], z = gate[1], n = gate[2];
  const T dan = dh * (1.f - z) * (1.f - n * n);
  const T dar = dan * hn * r * (1.f - r);
  const T daz = dh * (h_prev - n) * z * (1.f - z);
  dax[0] = dah[0] = dar;
  dax[1] = dah[1] = daz;
  dax[2] = dan;
  dah[2] = dan * r;
  dh_prev = dh * z;
}

}  // namespace trainer
