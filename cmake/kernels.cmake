# The GPU kernels (src/kernels/device_kernels.cu), built by nvcc into a
# fatbin and by hipcc into a code-object bundle, each embedded in
# libhetccl.so and loaded at run time by the runtime that can use it. A
# missing compiler leaves that image out (the library still builds and
# says so at run time); HETCCL_REQUIRE_KERNELS=ON makes that an error.
option(HETCCL_REQUIRE_KERNELS "Fail when nvcc or hipcc is missing" OFF)
set(HETCCL_CUDA_ARCHS "70;75;80;86;89;90" CACHE STRING "NVIDIA architectures (sm_XX; PTX of the last is added)")
set(HETCCL_HIP_ARCHS "gfx90a;gfx940;gfx942;gfx1030;gfx1100" CACHE STRING "AMD architectures (those hipcc knows are built)")

set(_kernel_source ${CMAKE_CURRENT_SOURCE_DIR}/src/kernels/device_kernels.cu)
set(_kernel_headers ${CMAKE_CURRENT_SOURCE_DIR}/src/kernels/reduce_math.h
  ${CMAKE_CURRENT_SOURCE_DIR}/src/kernels/formats.h ${CMAKE_CURRENT_SOURCE_DIR}/src/common/types.h)
set(_kernel_includes -I${CMAKE_CURRENT_SOURCE_DIR}/src -I${CMAKE_CURRENT_SOURCE_DIR}/include)
set(HETCCL_KERNEL_DEFINITIONS "")
set(HETCCL_KERNEL_IMAGES "")

find_program(HETCCL_NVCC nvcc HINTS /usr/local/cuda/bin ENV CUDA_HOME PATH_SUFFIXES bin)
if(HETCCL_NVCC)
  # Keep the architectures this nvcc knows (CUDA 13 dropped sm_70 and sm_72).
  execute_process(COMMAND ${HETCCL_NVCC} --list-gpu-arch OUTPUT_VARIABLE _listed ERROR_QUIET)
  set(_gencode "")
  set(_built "")
  foreach(arch ${HETCCL_CUDA_ARCHS})
    if(_listed MATCHES "compute_${arch}")
      list(APPEND _gencode -gencode arch=compute_${arch},code=sm_${arch})
      list(APPEND _built ${arch})
    else()
      message(STATUS "hetccl: ${HETCCL_NVCC} cannot build sm_${arch}: left out")
    endif()
  endforeach()
  set(HETCCL_CUDA_ARCHS_BUILT ${_built})
  list(GET _built -1 _last)
  list(APPEND _gencode -gencode arch=compute_${_last},code=compute_${_last})
  set(_fatbin ${CMAKE_CURRENT_BINARY_DIR}/kernels/hetccl_kernels.fatbin)
  add_custom_command(OUTPUT ${_fatbin}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/kernels
    COMMAND ${HETCCL_NVCC} -std=c++17 -O3 -fmad=false -fatbin ${_gencode} ${_kernel_includes} -o ${_fatbin} ${_kernel_source}
    DEPENDS ${_kernel_source} ${_kernel_headers}
    COMMENT "nvcc: GPU kernels for sm_${_built}" VERBATIM)
  list(APPEND HETCCL_KERNEL_DEFINITIONS HETCCL_CUDA_IMAGE="${_fatbin}")
  list(APPEND HETCCL_KERNEL_IMAGES ${_fatbin})
  message(STATUS "hetccl: CUDA kernels with ${HETCCL_NVCC} for sm_${_built} (+ PTX)")
elseif(HETCCL_REQUIRE_KERNELS)
  message(FATAL_ERROR "hetccl: nvcc not found (HETCCL_REQUIRE_KERNELS=ON)")
else()
  message(STATUS "hetccl: nvcc not found: no CUDA kernels in this build (NVIDIA ranks will say so at init)")
endif()

find_program(HETCCL_HIPCC hipcc HINTS /opt/rocm/bin ENV ROCM_PATH PATH_SUFFIXES bin)
if(HETCCL_HIPCC)
  # Keep the architectures this hipcc knows (ROCm 5.2 knows gfx940 but not
  # gfx942 or gfx1100, for instance).
  set(_offload "")
  set(_known "")
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/kernels/probe.hip "__global__ void probe() {}\n")
  foreach(arch ${HETCCL_HIP_ARCHS})
    execute_process(COMMAND ${HETCCL_HIPCC} --genco --offload-arch=${arch} -x hip
        ${CMAKE_CURRENT_BINARY_DIR}/kernels/probe.hip -o ${CMAKE_CURRENT_BINARY_DIR}/kernels/probe.hsaco
      RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
    if(_rc EQUAL 0)
      list(APPEND _offload --offload-arch=${arch})
      list(APPEND _known ${arch})
    else()
      message(STATUS "hetccl: ${HETCCL_HIPCC} cannot build ${arch}: left out")
    endif()
  endforeach()
  if(_known)
    set(_hsaco ${CMAKE_CURRENT_BINARY_DIR}/kernels/hetccl_kernels.hsaco)
    add_custom_command(OUTPUT ${_hsaco}
      COMMAND ${HETCCL_HIPCC} -std=c++17 -O3 -ffp-contract=off --genco ${_offload} ${_kernel_includes} -x hip -o ${_hsaco} ${_kernel_source}
      DEPENDS ${_kernel_source} ${_kernel_headers}
      COMMENT "hipcc: GPU kernels for ${_known}" VERBATIM)
    list(APPEND HETCCL_KERNEL_DEFINITIONS HETCCL_HIP_IMAGE="${_hsaco}")
    list(APPEND HETCCL_KERNEL_IMAGES ${_hsaco})
    message(STATUS "hetccl: HIP kernels with ${HETCCL_HIPCC} for ${_known}")
  endif()
elseif(HETCCL_REQUIRE_KERNELS)
  message(FATAL_ERROR "hetccl: hipcc not found (HETCCL_REQUIRE_KERNELS=ON)")
else()
  message(STATUS "hetccl: hipcc not found: no HIP kernels in this build (AMD ranks will say so at init)")
endif()

add_custom_target(hetccl_kernel_images DEPENDS ${HETCCL_KERNEL_IMAGES})
set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/src/kernels/kernel_images.cc PROPERTIES
  COMPILE_DEFINITIONS "${HETCCL_KERNEL_DEFINITIONS}" OBJECT_DEPENDS "${HETCCL_KERNEL_IMAGES}")
