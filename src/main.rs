//! The `tracefault` binary: parse the command line, call the library, map errors to exit codes.

use clap::Parser;

/// mimalloc: importing a large trace allocates and frees millions of small strings and maps,
/// and the system allocator spent a quarter of that time on its own bookkeeping. Built without
/// transparent huge pages (`no_thp`): with them every thread's first touch of its arena made
/// 2 MiB resident and zeroed it (`inspect` of a 4 MB file: 55-61 MiB and 0.08-0.15 s, against
/// 19-21 MiB and 0.01 s without).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let cli = tracefault::cli::Cli::parse();
    let code = match tracefault::cli::execute(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    };
    std::process::exit(code);
}
