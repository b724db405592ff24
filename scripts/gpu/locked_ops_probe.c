/* What a locked read-modify-write and a touched cache line cost next to the driver's own
 * cuMemMap/cuMemUnmap and cuMemAlloc/cuMemFree pairs (issue 24): the kinds of work a checker does
 * after the driver's call, without a checker. Variants interleaved per repetition; median ns per
 * pair. Build: cc -O2 -o probe locked_ops_probe.c -l:libcuda.so.1
 * Run: ./probe [PAIRS per repetition, 20000] [REPETITIONS, 15]. No shim is needed. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef int CUresult; typedef int CUdevice; typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUdeviceptr, H;
typedef struct { unsigned int type, requestedHandleTypes, locationType; int locationId; void *w; unsigned char f[8]; } Prop;
typedef struct { unsigned int locationType; int locationId; unsigned int flags; } Acc;
CUresult cuInit(unsigned); CUresult cuDeviceGet(CUdevice*,int); CUresult cuDevicePrimaryCtxRetain(CUcontext*,CUdevice);
CUresult cuCtxSetCurrent(CUcontext); CUresult cuMemGetAllocationGranularity(size_t*,const Prop*,int);
CUresult cuMemCreate(H*,size_t,const Prop*,unsigned long long); CUresult cuMemAddressReserve(CUdeviceptr*,size_t,size_t,CUdeviceptr,unsigned long long);
CUresult cuMemMap(CUdeviceptr,size_t,size_t,H,unsigned long long); CUresult cuMemUnmap(CUdeviceptr,size_t);
CUresult cuMemAlloc_v2(CUdeviceptr*,size_t); CUresult cuMemFree_v2(CUdeviceptr);
static int64_t now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000LL+t.tv_nsec;}
static volatile uint64_t atom[8] __attribute__((aligned(64)));
static volatile uint64_t plain[8] __attribute__((aligned(64)));
#define LINES 4096
static volatile uint64_t lines[LINES*8] __attribute__((aligned(64)));
static __attribute__((noinline)) void work(int v, int *pos){
  switch(v){
  case 0: break;
  case 1: for(int i=0;i<3;i++) __atomic_fetch_add(&atom[0],1,__ATOMIC_ACQ_REL); break; /* 3 locked */
  case 2: for(int i=0;i<3;i++) plain[0]++; break;
  case 3: { uint64_t s=0; for(int i=0;i<8;i++) s+=lines[(i*97)%LINES*8]; plain[1]=s; } break; /* 8 same lines: cold only if evicted */
  case 4: { uint64_t s=0; int p=0; for(int i=0;i<8;i++) { p = (int)lines[p*8]; s+=p; } plain[1]=s; } break; /* 8 dependent same lines */
  case 5: { for(int i=0;i<8;i++) lines[(i*97)%LINES*8 + 1]++; } break; /* 8 stores to same lines */
  }
}
static int cmp(const void*a,const void*b){int64_t x=*(int64_t*)a,y=*(int64_t*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  int N=argc>1?atoi(argv[1]):20000, R=argc>2?atoi(argv[2]):15;
  for(int i=0;i<LINES;i++) lines[i*8]= (i*97+13)%LINES; /* chain for case 4: starts at 0 */
  for(int i=0;i<8;i++){ int a=(i*97)%LINES, b=((i+1)*97)%LINES; lines[a*8]=b; }
  CUdevice d; CUcontext c; cuInit(0); cuDeviceGet(&d,0); cuDevicePrimaryCtxRetain(&c,d); cuCtxSetCurrent(c);
  Prop p; memset(&p,0,sizeof p); p.type=1; p.locationType=1; p.locationId=0; size_t g; cuMemGetAllocationGranularity(&g,&p,0);
  H h; CUdeviceptr va; if(cuMemCreate(&h,g,&p,0)||cuMemAddressReserve(&va,2*g,0,0,0)) {puts("setup failed");return 1;}
  const char*names[]={"none","3locked","3plain","8lines","8chain","8stores"}; int NV=6;
  for(int kind=0;kind<2;kind++){
    int64_t res[6][64];
    for(int r=0;r<R;r++) for(int vv=0;vv<NV;vv++){ int v=(vv+r)%NV; int pos=0;
      int64_t t0=now();
      for(int i=0;i<N;i++){
        if(kind==0){ cuMemMap(va,g,0,h,0); work(v,&pos); cuMemUnmap(va,g); work(v,&pos);}
        else { CUdeviceptr x; cuMemAlloc_v2(&x,256); work(v,&pos); cuMemFree_v2(x); work(v,&pos);}
      }
      res[v][r]=(now()-t0)*1000/N; }
    for(int v=0;v<NV;v++){ qsort(res[v],R,sizeof(int64_t),cmp); }
    for(int v=0;v<NV;v++) printf("%s %-8s median %.1f ns/pair (+%.1f) lo %.1f hi %.1f\n", kind?"alloc":"vmm", names[v], res[v][R/2]/1000.0, (res[v][R/2]-res[0][R/2])/1000.0, res[v][0]/1000.0, res[v][R-1]/1000.0);
  }
  return 0;
}
