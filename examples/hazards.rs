//! The hazard catalog: each hazard of non-coherent sharing under a deliberately broken
//! protocol and under the real one, with the same seeds and event rates.
//!
//! ```sh
//! cargo run --release --example hazards
//! cargo run --release --example hazards -- --json --seeds 64
//! ```

use clap::Parser;

/// Runs the hazard catalog and prints broken-versus-BI counts.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Print one JSON object per hazard per line instead of a table.
    #[arg(long)]
    json: bool,
    /// How many seeds each variant runs with.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    seeds: u64,
}

fn main() {
    let args = Args::parse();
    let rows: Vec<_> = bi::hazards::catalog()
        .iter()
        .map(|h| bi::hazards::run(h, args.seeds))
        .collect();
    if args.json {
        for row in &rows {
            println!("{}", row.to_json());
        }
        return;
    }
    let name = rows.iter().map(|r| r.hazard.len()).max().unwrap_or(6);
    let fault = rows
        .iter()
        .map(|r| format!("{:?}", r.fault).len())
        .max()
        .unwrap_or(5);
    println!(
        "{:<name$} {:<fault$} {:>7} {:>4}  counted",
        "hazard", "switched off", "broken", "bi"
    );
    for row in &rows {
        println!(
            "{:<name$} {:<fault$} {:>7} {:>4}  {}",
            row.hazard,
            format!("{:?}", row.fault),
            row.broken,
            row.bi,
            row.counts
        );
    }
    println!(
        "({} seeds per variant; broken: the shipped code with the row's mechanism switched \
         off; a sound protocol has bi = 0 on every row)",
        args.seeds
    );
    if rows.iter().any(|r| r.bi > 0 || r.broken == 0) {
        std::process::exit(1);
    }
}
