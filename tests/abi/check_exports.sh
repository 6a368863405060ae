#!/bin/sh
# Every NCCL entry point is exported as a weak ncclX aliasing a strong pncclX,
# and nothing else but hetccl* leaves the library.
lib="$1"
syms=$(nm -D --defined-only "$lib") || exit 1
status=0
count=0
for f in GetVersion GetErrorString GetLastError GetUniqueId CommInitRank CommInitAll CommInitRankConfig \
         CommInitRankScalable CommSplit CommShrink CommAbort CommFinalize CommDestroy CommGetAsyncError CommCount \
         CommUserRank CommCuDevice AllReduce Broadcast Bcast Reduce AllGather ReduceScatter AlltoAll Gather Scatter \
         Send Recv GroupStart GroupEnd GroupSimulateEnd RedOpCreatePreMulSum RedOpDestroy CommRegister CommDeregister \
         MemAlloc MemFree CommWindowRegister CommWindowDeregister DevCommCreate DevCommDestroy TeamWorld TeamLsa \
         TeamRail TeamRankToWorld TeamRankToLsa LLA2ACalcSlots LLA2ACreateRequirement LsaBarrierCreateRequirement \
         GinBarrierCreateRequirement WinGetUserPtr CommSuspend CommResume CommMemStats PutSignal Signal WaitSignal \
         CommGetUniqueId CommGrow ParamBind ParamGetI8 ParamGetI16 ParamGetI32 ParamGetI64 ParamGetU8 \
         ParamGetU16 ParamGetU32 ParamGetU64 ParamGetStr ParamGet ParamGetParameter ParamGetAllParameterKeys \
         ParamDumpAll; do
  count=$((count + 1))
  weak=$(echo "$syms" | awk -v s="nccl$f" '$3 == s {print $2}')
  strong=$(echo "$syms" | awk -v s="pnccl$f" '$3 == s {print $2}')
  waddr=$(echo "$syms" | awk -v s="nccl$f" '$3 == s {print $1}')
  saddr=$(echo "$syms" | awk -v s="pnccl$f" '$3 == s {print $1}')
  if [ "$weak" != "W" ] || [ "$strong" != "T" ] || [ "$waddr" != "$saddr" ]; then
    echo "nccl$f: expected weak nccl$f aliasing strong pnccl$f, got '$weak' '$strong' ($waddr vs $saddr)"
    status=1
  fi
done
others=$(echo "$syms" | awk '{print $3}' | grep -v -E '^(p?nccl|hetccl)' | grep -v '^$')
if [ -n "$others" ]; then
  echo "unexpected exported symbols:"; echo "$others"; status=1
fi
[ $status -eq 0 ] && echo "all $count entry points exported as weak aliases of strong pnccl symbols"
exit $status
