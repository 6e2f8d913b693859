//! The `fulmar` command.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "fulmar",
    version,
    about = "A userspace OpenFlow 1.3 software switch"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {}
}
