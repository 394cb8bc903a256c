//! The error of every command. Its message names the file, field or value at fault; `main`
//! prints it as `error: <message>` and exits with status 2 (status 1 is a failed verdict).

/// What a command can fail with.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A dataset could not be loaded.
    #[error(transparent)]
    Data(#[from] boldcast::data::DataError),
    /// The subjects could not be split, or a subject list could not be read.
    #[error(transparent)]
    Split(#[from] boldcast::data::SplitError),
    /// A configuration could not be resolved.
    #[error(transparent)]
    Config(#[from] boldcast_train::config::ConfigError),
    /// A training run failed.
    #[error(transparent)]
    Train(#[from] boldcast_train::TrainError),
    /// An analysis (eval, forecast, embed, fingerprint, floor) failed.
    #[error(transparent)]
    Analysis(#[from] boldcast_analysis::AnalysisError),
    /// A fixture parameter is invalid.
    #[error(transparent)]
    Fixture(#[from] boldcast::fixtures::FixtureError),
    /// A golden case could not be loaded or run.
    #[error(transparent)]
    Golden(#[from] boldcast_testkit::golden::GoldenError),
    /// A search could not be set up or recorded.
    #[error(transparent)]
    Tune(#[from] boldcast_train::tune::TuneError),
    /// The model, optimizer or trainer failed.
    #[error(transparent)]
    Core(#[from] boldcast::core::Error),
    /// A figure could not be drawn.
    #[error(transparent)]
    Plot(#[from] boldcast_plot::PlotError),
    /// A file (or standard output) could not be read or written.
    #[error(transparent)]
    Storage(#[from] boldcast::storage::StorageError),
    /// Anything else, described in words.
    #[error("{0}")]
    Msg(String),
}
