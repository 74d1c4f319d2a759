/**
 * Imported first by every entry point. sharp's image work and the filesystem object store's I/O
 * share libuv's thread pool (4 threads by default); with two ~70 ms image jobs in flight, file
 * reads and writes would queue behind them. The size must be set before the pool is first used.
 */
process.env.UV_THREADPOOL_SIZE ??= "16";
export {};
