// What a cold cache line costs after a driver call on this host (issue 24): cuMemAlloc(256) +
// cuMemFree, with K reads between them of lines that the program touched before the pair (as a
// shim would), spread over K pages or packed in 2 pages, independent or chained. Prints the ns per
// pair over the pair with no reads (K=0), median of 3 interleaved rounds of 9 loops of 2000 pairs each, a 256-byte allocation held throughout.
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
static char *buf;
static size_t idx[64];
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
static volatile uint64_t sink;
/* 32 functions, each on its own page of code: calling K of them is K cold code lines and pages. */
__attribute__((noinline, aligned(4096))) static uint64_t f0(uint64_t x){ return x * 3 + 0; }
__attribute__((noinline, aligned(4096))) static uint64_t f1(uint64_t x){ return x * 5 + 1; }
__attribute__((noinline, aligned(4096))) static uint64_t f2(uint64_t x){ return x * 7 + 2; }
__attribute__((noinline, aligned(4096))) static uint64_t f3(uint64_t x){ return x * 9 + 3; }
__attribute__((noinline, aligned(4096))) static uint64_t f4(uint64_t x){ return x * 11 + 4; }
__attribute__((noinline, aligned(4096))) static uint64_t f5(uint64_t x){ return x * 13 + 5; }
__attribute__((noinline, aligned(4096))) static uint64_t f6(uint64_t x){ return x * 15 + 6; }
__attribute__((noinline, aligned(4096))) static uint64_t f7(uint64_t x){ return x * 17 + 7; }
__attribute__((noinline, aligned(4096))) static uint64_t f8(uint64_t x){ return x * 19 + 8; }
__attribute__((noinline, aligned(4096))) static uint64_t f9(uint64_t x){ return x * 21 + 9; }
__attribute__((noinline, aligned(4096))) static uint64_t f10(uint64_t x){ return x * 23 + 10; }
__attribute__((noinline, aligned(4096))) static uint64_t f11(uint64_t x){ return x * 25 + 11; }
__attribute__((noinline, aligned(4096))) static uint64_t f12(uint64_t x){ return x * 27 + 12; }
__attribute__((noinline, aligned(4096))) static uint64_t f13(uint64_t x){ return x * 29 + 13; }
__attribute__((noinline, aligned(4096))) static uint64_t f14(uint64_t x){ return x * 31 + 14; }
__attribute__((noinline, aligned(4096))) static uint64_t f15(uint64_t x){ return x * 33 + 15; }
__attribute__((noinline, aligned(4096))) static uint64_t f16(uint64_t x){ return x * 35 + 16; }
__attribute__((noinline, aligned(4096))) static uint64_t f17(uint64_t x){ return x * 37 + 17; }
__attribute__((noinline, aligned(4096))) static uint64_t f18(uint64_t x){ return x * 39 + 18; }
__attribute__((noinline, aligned(4096))) static uint64_t f19(uint64_t x){ return x * 41 + 19; }
__attribute__((noinline, aligned(4096))) static uint64_t f20(uint64_t x){ return x * 43 + 20; }
__attribute__((noinline, aligned(4096))) static uint64_t f21(uint64_t x){ return x * 45 + 21; }
__attribute__((noinline, aligned(4096))) static uint64_t f22(uint64_t x){ return x * 47 + 22; }
__attribute__((noinline, aligned(4096))) static uint64_t f23(uint64_t x){ return x * 49 + 23; }
__attribute__((noinline, aligned(4096))) static uint64_t f24(uint64_t x){ return x * 51 + 24; }
__attribute__((noinline, aligned(4096))) static uint64_t f25(uint64_t x){ return x * 53 + 25; }
__attribute__((noinline, aligned(4096))) static uint64_t f26(uint64_t x){ return x * 55 + 26; }
__attribute__((noinline, aligned(4096))) static uint64_t f27(uint64_t x){ return x * 57 + 27; }
__attribute__((noinline, aligned(4096))) static uint64_t f28(uint64_t x){ return x * 59 + 28; }
__attribute__((noinline, aligned(4096))) static uint64_t f29(uint64_t x){ return x * 61 + 29; }
__attribute__((noinline, aligned(4096))) static uint64_t f30(uint64_t x){ return x * 63 + 30; }
__attribute__((noinline, aligned(4096))) static uint64_t f31(uint64_t x){ return x * 65 + 31; }
static uint64_t (*const fns[32])(uint64_t) = {f0,f1,f2,f3,f4,f5,f6,f7,f8,f9,f10,f11,f12,f13,f14,f15,f16,f17,f18,f19,f20,f21,f22,f23,f24,f25,f26,f27,f28,f29,f30,f31};
static double run(int k, int chained, int n, int reps){
  double t[31]; CUdeviceptr p;
  for(int r=0;r<reps;r++){
    double s=now();
    for(int i=0;i<n;i++){
      cuMemAlloc(&p,256); 
      uint64_t acc=0;
      if(chained==2){ for(int q=0;q<k;q++) acc=fns[q](acc); }
      else if(chained){ size_t j=idx[0]; for(int q=0;q<k;q++){ j=*(volatile size_t*)(buf+j); acc+=j; } }
      else { for(int q=0;q<k;q++) acc+=*(volatile uint64_t*)(buf+idx[q]); }
      cuMemFree(p);
      sink+=acc;
    }
    t[r]=(now()-s)/n;
  }
  qsort(t,reps,sizeof(double),cmp); return t[reps/2];
}
int main(int argc,char**argv){
  CUcontext c; CUdevice d; cuInit(0); cuDeviceGet(&d,0); cuDevicePrimaryCtxRetain(&c,d); cuCtxSetCurrent(c);
  buf=aligned_alloc(4096, 64<<20); for(size_t i=0;i<(64<<20);i+=64) buf[i]=1;
  CUdeviceptr keep; cuMemAlloc(&keep, 256); /* the pool chunk stays, as in a program that holds memory */
  int n=2000, reps=9; int ks[]={0,8,32};
  srand(1);
  for(int layout=0;layout<3;layout++) for(int chained=(layout==2?2:0);chained<(layout==2?3:2);chained++){
    for(int q=0;q<64;q++) idx[q]= layout==0 ? ((size_t)(rand()%16000))*4096 + (rand()%64)*64 : (size_t)(rand()%64)*64 + (q&1)*4096;
    if(chained) for(int q=0;q<63;q++) *(size_t*)(buf+idx[q])=idx[q+1]; 
    double v[3][3];
    for(int round=0;round<3;round++) for(int i=0;i<3;i++) v[i][round]=run(ks[i],chained,n,reps);
    printf("%s %s:", layout==0?"data, spread_pages":layout==1?"data, two_pages":"code, a page each", chained==2?"calls":chained?"chained":"independent");
    for(int i=0;i<3;i++){ double m[3]={v[i][0]-v[0][0],v[i][1]-v[0][1],v[i][2]-v[0][2]}; qsort(m,3,sizeof(double),cmp); printf("  K=%d %+.1f", ks[i], m[1]); }
    printf("   (base %.1f ns)\n", v[0][1]);
  }
  // the same K reads with no driver call between (warm): the floor
  double s=now(); uint64_t acc=0; for(int i=0;i<100000;i++) for(int q=0;q<32;q++) acc+=*(volatile uint64_t*)(buf+idx[q]); sink+=acc;
  printf("warm 32 reads: %.1f ns\n",(now()-s)/100000);
  return 0;
}
