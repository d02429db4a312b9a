# Written by gpuprov (stage env) from profile a100-rocky9; gpuprov replaces
# this file, so change the profile instead. POSIX sh, safe to source
# more than once.
CUDA_HOME='/usr/local/cuda-11.8'
export CUDA_HOME
case ":${PATH-}:" in
*:'/usr/local/cuda-11.8/bin':*) ;;
*) PATH='/usr/local/cuda-11.8/bin'"${PATH:+:$PATH}" ;;
esac
export PATH
case ":${LD_LIBRARY_PATH-}:" in
*:'/usr/local/cuda-11.8/lib64':*) ;;
*) LD_LIBRARY_PATH='/usr/local/cuda-11.8/lib64'"${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
esac
export LD_LIBRARY_PATH
NCCL_DEBUG='WARN'
export NCCL_DEBUG
