cmake_minimum_required(VERSION 3.16)
# Merges clang offload bundles of AMD code objects into one bundle, so the
# HIP runtime finds every architecture in the one image hetccl embeds.
# Run as: cmake -DBUNDLER=... -DOUTPUT=... -DINPUTS="a;b" -DREADERS="ra;rb"
#   -DWORKDIR=... -P this file
# Each input is read by its own compiler's bundler (READERS: a newer
# bundler refuses the host entry ROCm 5.2's writes); BUNDLER writes the
# result. An architecture found in two inputs is taken from the first.
file(MAKE_DIRECTORY ${WORKDIR})
set(_targets "")
set(_files "")
foreach(input reader IN ZIP_LISTS INPUTS READERS)
  execute_process(COMMAND ${reader} --list --type=o --input=${input}
    OUTPUT_VARIABLE _listed RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "cannot list the targets of ${input}")
  endif()
  string(REPLACE "\n" ";" _listed "${_listed}")
  foreach(target ${_listed})
    string(STRIP "${target}" target)
    if(target STREQUAL "" OR target MATCHES "^host-" OR target IN_LIST _targets)
      continue()
    endif()
    string(MAKE_C_IDENTIFIER "${target}" _name)
    set(_file ${WORKDIR}/${_name}.co)
    execute_process(COMMAND ${reader} --unbundle --type=o --input=${input} --targets=${target} --output=${_file}
      RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR "cannot take ${target} out of ${input}")
    endif()
    list(APPEND _targets ${target})
    list(APPEND _files ${_file})
  endforeach()
endforeach()
# Compilers put an empty host entry first; so does this.
file(WRITE ${WORKDIR}/host.o "")
list(PREPEND _targets host-x86_64-unknown-linux-gnu)
list(PREPEND _files ${WORKDIR}/host.o)
string(REPLACE ";" "," _target_arg "${_targets}")
list(TRANSFORM _files PREPEND "--input=" OUTPUT_VARIABLE _input_args)
execute_process(COMMAND ${BUNDLER} --type=o --targets=${_target_arg} ${_input_args} --output=${OUTPUT}
  RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "cannot bundle ${_targets} into ${OUTPUT}")
endif()
