//! The `tracefault` binary: parse the command line, call the library, map errors to exit codes.

use clap::Parser;

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
