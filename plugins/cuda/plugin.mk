# cuda plugin: C host code (no CUDA toolkit needed) plus the committed kernel
# fatbin, embedded with .incbin. `make blobs` rebuilds the fatbin with nvcc.
cuda_SRCS       := $(wildcard plugins/cuda/*.c)
cuda_LDLIBS     := -ldl -lm
cuda_OBJS_EXTRA := $(B)/obj/plugins/cuda/fatbin_blob.o

CUDA_FATBIN  := blobs/cuda/gllmk-kernels.fatbin
CUDA_KERNELS := $(sort $(wildcard plugins/cuda/kernels/*.cu plugins/cuda/kernels/*.cuh plugins/cuda/kernels/*.h))

$(B)/obj/plugins/cuda/fatbin_blob.o: plugins/cuda/fatbin.S $(CUDA_FATBIN)
	@mkdir -p $(dir $@)
	$(CC) -c $< -o $@

# The fatbin: SASS for every architecture from Turing to Hopper (sm_90a too:
# its image adds the wgmma kernels), plus compute_90 PTX that newer GPUs
# compile at load time.
NVCC             ?= $(firstword $(wildcard /usr/local/cuda/bin/nvcc) nvcc)
CUDA_ARCHS       := 75 80 86 87 89 90
CUDA_NVCC_FLAGS  := -std=c++17 -O3 --threads 0 \
                    $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) \
                    -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_90,code=compute_90

.PHONY: blobs-cuda
blobs:: blobs-cuda
blobs-cuda:
	@mkdir -p blobs/cuda
	$(NVCC) $(CUDA_NVCC_FLAGS) -fatbin plugins/cuda/kernels/module.cu -o $(CUDA_FATBIN)
	sha256sum $(CUDA_KERNELS) > blobs/cuda/MANIFEST
