//! The `firstbad` command line; every subcommand is a file under `cli/`.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
