int layered_fn(int x) { return x + 1; }
