#ifndef __cuda_cuda_h__
#define __cuda_cuda_h__
/**
 * CUDA API version number
 */
#define CUDA_VERSION 12040
#ifdef __cplusplus
extern "C" {
#endif
#endif
