//! `bc-cli floor`: the flags as the library's [`boldcast_analysis::floor::FloorRequest`].

use crate::args::FloorArgs;
use crate::error::CliError;
use boldcast_analysis::floor::{floor_report, FloorReport, FloorRequest, FloorSource};

/// Computes the floor `args` asks for.
pub fn run(args: &FloorArgs) -> Result<FloorReport, CliError> {
    let source = match (args.rho, &args.data) {
        (Some(rho), _) => FloorSource::Rho(rho),
        (None, Some(dir)) => FloorSource::Data(dir.clone()),
        (None, None) => return Err(CliError::Msg("floor: give --rho or --data".into())),
    };
    let req = FloorRequest { source, horizons: args.horizons.clone(), d_in: args.d_in, picks: args.picks.clone() };
    Ok(floor_report(&req)?)
}
