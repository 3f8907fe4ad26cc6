//! A client test as a run of the run model (`linerate_run::drive`): the
//! engine's intervals reach the reporters as they end, its end is the
//! run's, and a test that could not run ends as one (exit code 2).

use crate::client::{self, ClientOptions};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// How a client test ended, and the error to tell (a test that failed
/// part-way, after printing what it measured, or could not run).
#[derive(Debug)]
pub struct ClientEnd {
    pub ended: linerate_run::Ended,
    pub error: Option<String>,
}

/// Runs one client test through `reporters`, printing to `out`; `stop`
/// ends it. `opts.events` is set here.
pub fn run_client(
    opts: &mut ClientOptions,
    out: &mut dyn Write,
    stop: &AtomicBool,
    reporters: Box<dyn linerate_run::Reporter>,
) -> ClientEnd {
    let config = linerate_iperf_proto::report::test_start(
        &opts.params,
        opts.interval.as_secs_f64(),
        opts.udp_gso,
        false,
    );
    let mut said = None;
    // The live view and progress line know the run's length (-t; none
    // for -n/-k/-0).
    let p = &opts.params;
    let planned = (p.time_s > 0).then(|| f64::from(p.time_s + p.omit_s));
    let mode = linerate_run::Mode::Client;
    let ended = linerate_run::drive_planned(reporters, mode, config, None, planned, |run| {
        let (events, end) = run.engine();
        opts.events = Some(events);
        match client::run(opts, out, stop) {
            Ok(()) => Ok(end
                .measured()
                .unwrap_or_else(|| without_result("the test ended without a result".into()))),
            // It failed part-way, after printing what it measured.
            Err(e) if e.ran() => {
                let error = e.to_string();
                said = Some(error.clone());
                let mut m = end
                    .measured()
                    .unwrap_or_else(|| without_result(error.clone()));
                m.error = Some(error);
                Ok(m)
            }
            Err(e) => Err(e),
        }
    });
    match ended {
        Ok(ended) => ClientEnd { ended, error: said },
        // It could not run (refused, unreachable, authentication): 2.
        Err(e) => ClientEnd {
            ended: linerate_run::Ended {
                exit_code: 2,
                error: Some(e.to_string()),
                outcome: Arc::new(linerate_run::Failed {
                    error: e.to_string(),
                }),
            },
            error: Some(e.to_string()),
        },
    }
}

/// What a test that ended without its results measured: nothing.
fn without_result(error: String) -> linerate_run::Measured {
    linerate_run::Measured {
        duration_s: 0.0,
        rows: Vec::new(),
        outcome: Arc::new(linerate_run::Failed { error }),
        error: None,
    }
}
