# The GPU kernels (src/kernels/device/device_kernels.cu), built by nvcc into a
# fatbin and by hipcc (and clang) into a code-object bundle, each embedded in
# libhetccl.so and loaded at run time by the runtime that can use it. A
# missing compiler leaves that image out (the library still builds and
# says so at run time); HETCCL_REQUIRE_KERNELS=ON makes that an error.
option(HETCCL_REQUIRE_KERNELS "Fail when a kernel image or an AMD architecture cannot be built" OFF)
set(HETCCL_CUDA_ARCHS "70;75;80;86;89;90" CACHE STRING "NVIDIA architectures (sm_XX; PTX of the last is added)")
set(HETCCL_HIP_ARCHS "gfx908;gfx90a;gfx942;gfx950;gfx1030;gfx1100;gfx1101;gfx1200;gfx1201" CACHE STRING "AMD architectures (those a compiler here knows are built)")

set(_kernel_source ${CMAKE_CURRENT_SOURCE_DIR}/src/kernels/device/device_kernels.cu)
set(_kernel_headers ${CMAKE_CURRENT_SOURCE_DIR}/src/kernels/reduce_math.h
  ${CMAKE_CURRENT_SOURCE_DIR}/src/kernels/formats.h ${CMAKE_CURRENT_SOURCE_DIR}/src/common/types.h
  ${CMAKE_CURRENT_SOURCE_DIR}/src/kernels/low_latency.h ${CMAKE_CURRENT_SOURCE_DIR}/src/kernels/inbox.h
  ${CMAKE_CURRENT_SOURCE_DIR}/src/kernels/device/bare_hip.h)
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

# AMD: hipcc builds the architectures it knows; a newer clang in HIP mode,
# without ROCm headers (src/kernels/device/bare_hip.h), builds the ones it does not
# (Debian's ROCm 5.2 hipcc lacks gfx942, gfx950, gfx1100 and later; its
# clang-22 has them).
# Both go into one code-object bundle.
find_program(HETCCL_HIPCC hipcc HINTS /opt/rocm/bin ENV ROCM_PATH PATH_SUFFIXES bin)
# The newest clang here whose offload bundler is installed beside it
# (Debian ships the bundler in clang-tools-N).
if(NOT HETCCL_HIP_CLANG)
  foreach(version 22 21 20 19 18 17)
    find_program(_clang clang++-${version})
    if(_clang)
      execute_process(COMMAND ${_clang} -print-prog-name=clang-offload-bundler
        OUTPUT_VARIABLE _bundler OUTPUT_STRIP_TRAILING_WHITESPACE)
      if(EXISTS "${_bundler}")
        set(HETCCL_HIP_CLANG ${_clang} CACHE FILEPATH "clang for the AMD architectures hipcc does not know")
        break()
      endif()
    endif()
    unset(_clang CACHE)
  endforeach()
  unset(_clang CACHE)
endif()
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/kernels/probe.hip "__attribute__((global)) void probe() {}\n")
# Code object v5: what ROCm 6 and later load (clang 22 would write v6,
# which needs a newer ROCm than the targets do).
set(_bare_hip_flags -x hip -nogpuinc -nogpulib --offload-device-only -mcode-object-version=5 -DHETCCL_BARE_HIP)

# The architectures `compiler args...` can build.
function(hetccl_hip_archs_known out archs)
  set(_known "")
  foreach(arch ${archs})
    execute_process(COMMAND ${ARGN} --offload-arch=${arch} ${CMAKE_CURRENT_BINARY_DIR}/kernels/probe.hip
        -o ${CMAKE_CURRENT_BINARY_DIR}/kernels/probe.hsaco
      RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
    if(_rc EQUAL 0)
      list(APPEND _known ${arch})
    endif()
  endforeach()
  set(${out} ${_known} PARENT_SCOPE)
endfunction()

set(_hipcc_archs "")
if(HETCCL_HIPCC)
  hetccl_hip_archs_known(_hipcc_archs "${HETCCL_HIP_ARCHS}" ${HETCCL_HIPCC} --genco -x hip)
endif()
set(_clang_archs "")
set(_rest ${HETCCL_HIP_ARCHS})
list(REMOVE_ITEM _rest ${_hipcc_archs})
if(HETCCL_HIP_CLANG AND _rest)
  execute_process(COMMAND ${HETCCL_HIP_CLANG} -print-prog-name=clang-offload-bundler
    OUTPUT_VARIABLE HETCCL_OFFLOAD_BUNDLER OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(EXISTS "${HETCCL_OFFLOAD_BUNDLER}")
    hetccl_hip_archs_known(_clang_archs "${_rest}" ${HETCCL_HIP_CLANG} ${_bare_hip_flags})
  endif()
endif()
list(REMOVE_ITEM _rest ${_clang_archs})

set(_hip_bundles "")
set(_hip_bundle_readers "")  # the bundler of the compiler that wrote each
if(_hipcc_archs)
  list(TRANSFORM _hipcc_archs PREPEND --offload-arch= OUTPUT_VARIABLE _offload)
  set(_bundle ${CMAKE_CURRENT_BINARY_DIR}/kernels/hetccl_kernels_hipcc.hsaco)
  add_custom_command(OUTPUT ${_bundle}
    COMMAND ${HETCCL_HIPCC} -std=c++17 -O3 -ffp-contract=off --genco ${_offload} ${_kernel_includes} -x hip -o ${_bundle} ${_kernel_source}
    DEPENDS ${_kernel_source} ${_kernel_headers}
    COMMENT "hipcc: GPU kernels for ${_hipcc_archs}" VERBATIM)
  list(APPEND _hip_bundles ${_bundle})
  execute_process(COMMAND ${HETCCL_HIPCC} -print-prog-name=clang-offload-bundler
    OUTPUT_VARIABLE _reader OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  list(APPEND _hip_bundle_readers ${_reader})
  message(STATUS "hetccl: HIP kernels with ${HETCCL_HIPCC} for ${_hipcc_archs}")
endif()
if(_clang_archs)
  list(TRANSFORM _clang_archs PREPEND --offload-arch= OUTPUT_VARIABLE _offload)
  set(_bundle ${CMAKE_CURRENT_BINARY_DIR}/kernels/hetccl_kernels_clang.hsaco)
  add_custom_command(OUTPUT ${_bundle}
    COMMAND ${HETCCL_HIP_CLANG} -std=c++17 -O3 -ffp-contract=off ${_bare_hip_flags} ${_offload} ${_kernel_includes} -o ${_bundle} ${_kernel_source}
    DEPENDS ${_kernel_source} ${_kernel_headers}
    COMMENT "clang (HIP mode): GPU kernels for ${_clang_archs}" VERBATIM)
  list(APPEND _hip_bundles ${_bundle})
  list(APPEND _hip_bundle_readers ${HETCCL_OFFLOAD_BUNDLER})
  message(STATUS "hetccl: HIP kernels with ${HETCCL_HIP_CLANG} for ${_clang_archs}")
endif()
if(_rest AND HETCCL_REQUIRE_KERNELS)
  message(FATAL_ERROR "hetccl: no compiler here builds ${_rest} (HETCCL_REQUIRE_KERNELS=ON; install clang-22 with clang-tools-22, or a newer ROCm)")
elseif(_rest)
  message(STATUS "hetccl: no compiler here builds ${_rest}: left out")
endif()
set(HETCCL_HIP_ARCHS_BUILT ${_hipcc_archs} ${_clang_archs})

list(LENGTH _hip_bundles _bundle_count)
if(_bundle_count EQUAL 1)
  set(_hsaco ${_hip_bundles})
elseif(_bundle_count GREATER 1)
  set(_hsaco ${CMAKE_CURRENT_BINARY_DIR}/kernels/hetccl_kernels.hsaco)
  add_custom_command(OUTPUT ${_hsaco}
    COMMAND ${CMAKE_COMMAND} -DBUNDLER=${HETCCL_OFFLOAD_BUNDLER} -DOUTPUT=${_hsaco} "-DINPUTS=${_hip_bundles}" "-DREADERS=${_hip_bundle_readers}"
      -DWORKDIR=${CMAKE_CURRENT_BINARY_DIR}/kernels/code_objects -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/merge_hip_bundles.cmake
    DEPENDS ${_hip_bundles} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/merge_hip_bundles.cmake
    COMMENT "one code-object bundle for ${HETCCL_HIP_ARCHS_BUILT}" VERBATIM)
endif()
if(_bundle_count GREATER 0)
  list(APPEND HETCCL_KERNEL_DEFINITIONS HETCCL_HIP_IMAGE="${_hsaco}")
  list(APPEND HETCCL_KERNEL_IMAGES ${_hsaco})
elseif(HETCCL_REQUIRE_KERNELS)
  message(FATAL_ERROR "hetccl: no HIP compiler (hipcc, or clang 17 or newer) builds any of ${HETCCL_HIP_ARCHS} (HETCCL_REQUIRE_KERNELS=ON)")
else()
  message(STATUS "hetccl: no HIP compiler found: no HIP kernels in this build (AMD ranks will say so at init)")
endif()

add_custom_target(hetccl_kernel_images DEPENDS ${HETCCL_KERNEL_IMAGES})
set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/src/kernels/device/kernel_images.cc PROPERTIES
  COMPILE_DEFINITIONS "${HETCCL_KERNEL_DEFINITIONS}" OBJECT_DEPENDS "${HETCCL_KERNEL_IMAGES}")
