#include <stdio.h>
int layered_fn(int);
int main(void) { printf("LAYERED %d\n", layered_fn(1)); return 0; }
