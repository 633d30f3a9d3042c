/* Issue 27: a stand-in for the one cuBLASLt symbol that Transformer Engine 2.14.1's CUDA 13 wheel
 * (libtransformer_engine.so, built against cuBLAS 13.2) references and the cuBLASLt 13.1 that
 * torch 2.11+cu130 brings lacks: cublasLtGroupedMatrixLayoutInit_internal, behind TE's cuBLASLt
 * grouped GEMM. Without it the library does not load ("undefined symbol ..., version
 * libcublasLt.so.13"). The stand-in answers CUBLAS_STATUS_NOT_SUPPORTED (15), so a grouped GEMM
 * through cuBLASLt fails loudly rather than computing anything; dense layers never call it.
 *
 *   gcc -shared -fPIC -O2 -o libte_cublaslt_compat.so tools/te_cublaslt_compat.c \
 *       -Wl,--version-script=<(printf 'libcublasLt.so.13 { global: cublasLtGroupedMatrixLayoutInit_internal; local: *; };')
 *
 * and preload it (LD_PRELOAD): its version node carries cuBLASLt's name, which is what the
 * library's versioned reference asks for. tools/te_prepare.sh builds it; tools/te_device.sh preloads it.
 */
int cublasLtGroupedMatrixLayoutInit_internal(void) { return 15; }
