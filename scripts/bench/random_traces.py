"""Random IPC, logical endpoint, VMM and pool traces for comparing two builds' reports (scripts/report-diff.sh).

Usage: random_traces.py SEED DIR

Writes the trace files of 2 to 4 processes (some of one pid on two hosts) into DIR: exports,
opens, closes and frees of 1 to 3 handles at 1 to 3 addresses, context destroys, event
exports, opens and destroys, and most processes' exit records (after their last call). Times
are multiples of 1 us in a 30 us window, so that calls of one time abound; failures, unreachable
devices and two contexts on two devices are drawn too. Every third seed spells the calls in HIP;
every fifth (seed % 5 == 1) makes logical endpoint calls instead (creates, exports, imports,
destroys, binds, id reserves and releases), and every fifth (seed % 5 == 2) VMM calls (creates,
retains, imports, releases, reservations and their frees, maps with and without a stack,
unmaps, POSIX fd exports, and exit records naming fds still open), and every fifth (seed % 5 ==
3) pool pointer exports, imports and frees, and FABRIC exports and imports (memory and pools)
of processes in one of two IMEX domains.
The same seed writes the same files.
"""
import json, random, sys, os
seed=int(sys.argv[1]); out=sys.argv[2]
R=random.Random(seed)
os.makedirs(out, exist_ok=True)
fps=["fp:%016x"%(0x1000+i) for i in range(R.randint(1,3))]
ptrs=["0x%x"%(0x7000+0x100*i) for i in range(R.randint(1,3))]
ctxs=["0xc1","0xc2"]
nproc=R.randint(2,4)
HIP = seed%3==0
ENDPOINTS = seed%5==1
VMM = seed%5==2
POOL = seed%5==3
for p in range(nproc):
    twin = p>0 and R.random()<0.3
    pid=100+(p-1 if twin else p)
    host="h2" if twin else "h"
    lines=[{"v":2,"seq":0,"t":0,"tid":pid,"event":"process","pid":pid,"ppid":1,"exe":"/x","shim_version":"0.1.0","boot_id":"b"+host,"host":host,"t0_wall_ns":1000000000,"t0_mono_ns":5}]
    if POOL and R.random()<0.8: lines[0]["imex_domain"]=R.choice(["d1","d2"])
    seq=1
    for k in range(R.randint(3,40)):
        t=R.randint(1,30)*1000
        kind=R.choice(["exp","exp","open","open","open","close","close","free","free","destroy","eexp","eopen","edestroy"])
        if ENDPOINTS:
            kind=R.choice(["lcreate","lexport","limport","ldestroy","lbind","lbind","lreserve","lrelease"])
        if POOL:
            kind=R.choice(["pexport","pexport","pimport","pimport","pfree","pfree","pfree","fexport","fimport"])
        if VMM:
            kind=R.choice(["vcreate","vcreate","vretain","vimport","vrelease","vrelease","vreserve","vfree","vmap","vmap","vunmap","vunmap","vexport"])
        ctx=R.choice(ctxs); dev=R.randint(0,1)
        rec={"seq":seq,"t":t,"tid":pid}
        if kind=="exp":
            rec.update({"fn":"cuIpcGetMemHandle","a":{"*pHandle":R.choice(fps),"dptr":R.choice(ptrs)},"r":R.choice([0,0,0,1]),"ctx":ctx,"dev":dev,"uuid":"GPU-%d"%dev})
        elif kind=="open":
            rec.update({"fn":"cuIpcOpenMemHandle_v2","a":{"*pdptr":R.choice(ptrs),"handle":R.choice(fps),"Flags":1},"r":R.choice([0,0,0,201]),"ctx":ctx,"dev":dev,"uuid":"GPU-%d"%dev})
            if R.random()<0.2: rec["unreachable"]=["GPU-%d"%(1-dev)]
        elif kind=="close":
            rec.update({"fn":"cuIpcCloseMemHandle","a":{"dptr":R.choice(ptrs)},"r":R.choice([0,0,1])})
        elif kind=="free":
            rec.update({"fn":"cuMemFree_v2","a":{"dptr":R.choice(ptrs)},"r":0})
        elif kind=="destroy":
            rec.update({"fn":"cuCtxDestroy_v2","a":{"ctx":ctx},"r":0})
        elif kind=="eexp":
            rec.update({"fn":"cuIpcGetEventHandle","a":{"*pHandle":R.choice(fps),"event":R.choice(ptrs)},"r":0})
        elif kind=="eopen":
            rec.update({"fn":"cuIpcOpenEventHandle","a":{"*phEvent":R.choice(ptrs),"handle":R.choice(fps)},"r":0})
        elif kind=="vcreate" or kind=="vretain" or kind=="vimport":
            name={"vcreate":"cuMemCreate","vretain":"cuMemRetainAllocationHandle","vimport":"cuMemImportFromShareableHandle"}[kind]
            rec.update({"fn":name,"a":{"*handle":"0x%x"%R.randint(1,4),"size":0x200000},"r":R.choice([0,0,0,1])})
        elif kind=="vrelease":
            rec.update({"fn":"cuMemRelease","a":{"handle":"0x%x"%R.randint(1,4)},"r":R.choice([0,0,1])})
        elif kind=="vreserve":
            rec.update({"fn":"cuMemAddressReserve","a":{"*ptr":"0x%x"%(0x10000000*R.randint(1,3)),"size":"0x%x"%(0x200000*R.randint(1,4))},"r":R.choice([0,0,1])})
        elif kind=="vfree":
            rec.update({"fn":"cuMemAddressFree","a":{"ptr":"0x%x"%(0x10000000*R.randint(1,3)),"size":"0x%x"%(0x200000*R.randint(1,4))},"r":R.choice([0,0,1])})
        elif kind=="vmap":
            rec.update({"fn":"cuMemMap","a":{"ptr":"0x%x"%(0x10000000+0x200000*R.randint(0,5)),"size":"0x%x"%(0x200000*R.randint(1,2)),"offset":0,"handle":"0x%x"%R.randint(1,4),"flags":0},"r":R.choice([0,0,0,1])})
            if R.random()<0.4: rec["stack"]=[{"module":"/x","offset":"0x%x"%R.randint(1,3)}]
        elif kind=="vunmap":
            rec.update({"fn":"cuMemUnmap","a":{"ptr":"0x%x"%(0x10000000+0x200000*R.randint(0,5)),"size":"0x%x"%(0x200000*R.randint(1,3))},"r":R.choice([0,0,1])})
        elif kind=="vexport":
            rec.update({"fn":"cuMemExportToShareableHandle","a":{"*shareableHandle":R.randint(30,33),"handle":"0x%x"%R.randint(1,4),"handleType":"CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR","flags":0},"r":R.choice([0,0,1])})
        elif kind=="pexport":
            rec.update({"fn":"cuMemPoolExportPointer","a":{"*shareData_out":R.choice(fps),"ptr":R.choice(ptrs)},"r":R.choice([0,0,0,1])})
        elif kind=="pimport":
            rec.update({"fn":"cuMemPoolImportPointer","a":{"*ptr_out":R.choice(ptrs),"pool":"0x5","*shareData":R.choice(fps)},"r":R.choice([0,0,0,1])})
        elif kind=="pfree":
            rec.update({"fn":R.choice(["cuMemFree_v2","cuMemFreeAsync"]),"a":{"dptr":R.choice(ptrs)},"r":R.choice([0,0,1])})
        elif kind=="fexport":
            pool=R.random()<0.5
            rec.update({"fn":"cuMemPoolExportToShareableHandle" if pool else "cuMemExportToShareableHandle","a":{("*handle_out" if pool else "*shareableHandle"):R.choice(fps),"handleType":"CU_MEM_HANDLE_TYPE_FABRIC"},"r":R.choice([0,0,1])})
        elif kind=="fimport":
            pool=R.random()<0.5
            rec.update({"fn":"cuMemPoolImportFromShareableHandle" if pool else "cuMemImportFromShareableHandle","a":{("*handle" if pool else "*osHandle"):R.choice(fps),"handleType":"CU_MEM_HANDLE_TYPE_FABRIC"},"r":R.choice([0,1,1,801])})
        elif kind=="lcreate":
            rec.update({"fn":"cuLogicalEndpointCreate","a":{"leId":R.randint(1,3),"prop":{"type":R.choice(["CU_LOGICAL_ENDPOINT_TYPE_UNICAST","CU_LOGICAL_ENDPOINT_TYPE_MULTICAST"]),"unicast.device":R.randint(0,1)}},"r":R.choice([0,0,1])})
        elif kind=="lexport":
            rec.update({"fn":"cuLogicalEndpointExport","a":{"*handle":R.choice(fps),"leId":R.randint(1,3)},"r":R.choice([0,0,1])})
        elif kind=="limport":
            rec.update({"fn":"cuLogicalEndpointImport","a":{"leId":R.randint(7,9),"*handle":R.choice(fps)},"r":R.choice([0,0,1])})
        elif kind=="ldestroy":
            rec.update({"fn":"cuLogicalEndpointDestroy","a":{"leId":R.choice([1,2,3,7,8,9])},"r":R.choice([0,0,1])})
        elif kind=="lbind":
            rec.update({"fn":R.choice(["cuLogicalEndpointBindMem","cuLogicalEndpointBindAddr"]),"a":{"leId":R.randint(7,9)},"r":R.choice([0,1])})
        elif kind=="lreserve":
            rec.update({"fn":"cuLogicalEndpointIdReserve","a":{"*baseLeId":R.choice([10,20,30]),"count":R.randint(0,8)},"r":R.choice([0,0,1])})
        elif kind=="lrelease":
            rec.update({"fn":"cuLogicalEndpointIdRelease","a":{"baseLeId":R.randint(10,34),"count":R.randint(0,8)},"r":R.choice([0,0,1])})
        elif kind=="edestroy":
            rec.update({"fn":"cuEventDestroy_v2","a":{"hEvent":R.choice(ptrs)},"r":0})
        lines.append(rec); seq+=1
    if R.random()<0.7:
        last=max([l["t"] for l in lines[1:]]+[0])
        ex={"seq":seq,"t":last+R.randint(0,2)*1000,"tid":pid,"event":"exit","calls":seq-1,"findings_reported":0}
        if VMM and R.random()<0.6: ex["exported_fds_open"]=R.sample([30,31,32,33,34],R.randint(1,3))
        lines.append(ex)
    if HIP and VMM:
        ren={"cuMemCreate":("hipMemCreate",{}),"cuMemRetainAllocationHandle":("hipMemRetainAllocationHandle",{}),
             "cuMemImportFromShareableHandle":("hipMemImportFromShareableHandle",{}),"cuMemRelease":("hipMemRelease",{}),
             "cuMemAddressReserve":("hipMemAddressReserve",{}),"cuMemAddressFree":("hipMemAddressFree",{"ptr":"devPtr"}),
             "cuMemMap":("hipMemMap",{}),"cuMemUnmap":("hipMemUnmap",{})}
        for l in lines:
            if l.get("fn") in ren:
                name,m=ren[l["fn"]]; l["fn"]=name
                l["a"]={m.get(k,k):v for k,v in l["a"].items()}
    elif HIP:
        ren={"cuIpcGetMemHandle":("hipIpcGetMemHandle",{"dptr":"devPtr","*pHandle":"*handle"}),
             "cuIpcOpenMemHandle_v2":("hipIpcOpenMemHandle",{"*pdptr":"*devPtr"}),
             "cuIpcCloseMemHandle":("hipIpcCloseMemHandle",{"dptr":"devPtr"}),
             "cuMemFree_v2":("hipFree",{"dptr":"ptr"}),
             "cuIpcGetEventHandle":("hipIpcGetEventHandle",{"*pHandle":"*handle"}),
             "cuIpcOpenEventHandle":("hipIpcOpenEventHandle",{"*phEvent":"*event"}),
             "cuEventDestroy_v2":("hipEventDestroy",{"hEvent":"event"})}
        for l in lines:
            if l.get("fn") in ren:
                name,m=ren[l["fn"]]; l["fn"]=name
                l["a"]={m.get(k,k):v for k,v in l["a"].items()}
    R.shuffle(lines[1:]) if R.random()<0.2 else None
    with open(os.path.join(out,"%d.%s.jsonl"%(pid,host)),"w") as f:
        for l in lines: f.write(json.dumps(l)+"\n")
