//! The throughput test's `run`, in this process: participant 1 runs a
//! one-test iperf3-compatible server (linerate-iperf's), participant 0
//! the client against it 3 s after the start (the iperf3 tool's wait), both
//! through the run contract (`linerate_run::drive` for the client, the
//! server's `drive_engine` per test), each result from its run's typed
//! outcome. Every run is bounded: at its limit it is stopped and said to be.

use crate::auth::TaskAuth;
use crate::error::{Error, bad};
use crate::input::{ParticipantData, RunInput};
use crate::plan::{self, Plan};
use crate::result::{Iperf3Doc, ThroughputResult, from_document};
use crate::spec::{SERVER_SHUTDOWN_S, ThroughputSpec, WAIT_SLEEP_S};
use linerate_iperf::{ClientOptions, ServerOptions};
use linerate_run::{Event, Fanout, Mode, Reporter, SharedOutcome, SharedReporter};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// What a server that saw no client says.
pub const NO_CLIENT: &str =
    "no client came to the server before its --idle-timeout (is participant 0 running?)";

/// Seconds the client may take: the test, omitted seconds, set-up and
/// the wind-down.
fn client_limit_s(s: &ThroughputSpec) -> Result<f64, Error> {
    Ok(s.time_s()? as f64 + s.omit_s()? + s.setup_s()? + SERVER_SHUTDOWN_S)
}

/// Seconds the server may take: the client's, plus its wait.
fn server_limit_s(s: &ThroughputSpec) -> Result<f64, Error> {
    Ok(client_limit_s(s)? + WAIT_SLEEP_S)
}

/// Runs `body`, setting `stop` if it is still running after `limit_s`;
/// whether it had to.
pub(crate) fn bounded<T>(limit_s: f64, stop: &AtomicBool, body: impl FnOnce() -> T) -> (T, bool) {
    let (done, wait) = mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let watchdog = scope.spawn(move || {
            let late = wait.recv_timeout(Duration::from_secs_f64(limit_s)).is_err();
            if late {
                stop.store(true, Ordering::SeqCst);
            }
            late
        });
        let out = body();
        let _ = done.send(());
        (out, watchdog.join().unwrap_or(false))
    })
}

/// A run's end: its outcome, and the error it reported.
type Kept = (SharedOutcome, Option<String>);

/// Keeps a run's end (the server's tests report through the run contract
/// into this): the end, and the error reported before it.
#[derive(Clone, Default)]
struct KeepEnd(Arc<Mutex<Option<Kept>>>, Arc<Mutex<Option<String>>>);

impl Reporter for KeepEnd {
    fn report(&mut self, ev: &Event) -> std::io::Result<()> {
        match ev {
            Event::Error(e) => {
                if let Ok(mut k) = self.1.lock() {
                    *k = Some(e.clone());
                }
            }
            Event::End(end) => {
                let error = self.1.lock().ok().and_then(|e| e.clone());
                if let Ok(mut k) = self.0.lock() {
                    *k = Some((end.outcome.clone(), error));
                }
            }
            _ => {}
        }
        Ok(())
    }
}

impl KeepEnd {
    fn take(&self) -> Option<Kept> {
        self.0.lock().ok()?.take()
    }
}

/// A side's result from its run's outcome: its document typed, in diags
/// the command line and the document (system_info redacted, as the iperf3
/// tool does).
fn outcome_result(
    plan_line: &str,
    notes: &[String],
    ended: Result<Kept, String>,
    stopped_at: Option<f64>,
) -> ThroughputResult {
    let mut head = notes.to_vec();
    head.push(plan_line.to_string());
    let head = head.join("\n");
    let (outcome, error) = match ended {
        Ok(e) => e,
        Err(e) => {
            return ThroughputResult::failed(format!("linerate returned an error: {e}"), head);
        }
    };
    let mut doc = outcome.document();
    if let Some(info) = doc.pointer_mut("/start/system_info") {
        *info = Value::from("REDACTED");
    }
    let shown = serde_json::to_string_pretty(&doc).unwrap_or_default();
    let diags = format!("{head}\n\n{shown}");
    if let Some(limit) = stopped_at {
        return ThroughputResult::failed(
            format!("linerate did not finish within {limit:.0} s and was stopped"),
            diags,
        );
    }
    if let Some(e) = error {
        return ThroughputResult::failed(format!("linerate returned an error: {e}"), diags);
    }
    let typed = serde_json::from_value::<Iperf3Doc>(doc)
        .map_err(|e| format!("linerate's document: {e}"))
        .and_then(|d| from_document(&d));
    match typed {
        Ok(mut r) => {
            r.diags = Some(diags);
            r
        }
        Err(e) => ThroughputResult::failed(e, diags),
    }
}

/// What a client test measured, kept for its end (nothing when it ended
/// without its results).
fn measured_or(end: &linerate_run::EngineEnd, error: &str) -> linerate_run::Measured {
    end.measured().unwrap_or_else(|| linerate_run::Measured {
        duration_s: 0.0,
        rows: Vec::new(),
        outcome: Arc::new(linerate_run::Failed {
            error: error.to_string(),
        }),
        error: None,
    })
}

/// The client's test through `drive`, bounded.
pub fn run_client(s: &ThroughputSpec, port: u16, auth: Option<&TaskAuth>) -> ThroughputResult {
    let (plan, limit) = match plan::client(s, port, auth)
        .and_then(|p| Ok((p, client_limit_s(s).map_err(|e| e.to_string())?)))
    {
        Ok(p) => p,
        Err(e) => return ThroughputResult::failed(e, ""),
    };
    let Plan {
        opts,
        cmdline,
        notes,
    } = plan;
    let stop = AtomicBool::new(false);
    let config = linerate_iperf_proto::report::test_start(
        &opts.params,
        opts.interval.as_secs_f64(),
        opts.udp_gso,
        false,
    );
    let (ended, late) = bounded(limit, &stop, || {
        linerate_run::drive(Box::new(Fanout::new()), Mode::Client, config, None, |run| {
            let (events, end) = run.engine();
            let opts = ClientOptions {
                events: Some(events),
                ..opts.clone()
            };
            match linerate_iperf::client::run(&opts, &mut std::io::sink(), &stop) {
                Ok(()) => Ok(measured_or(&end, "the test ended without a result")),
                // It failed part-way: what it measured, and why.
                Err(e) if e.ran() => {
                    let mut m = measured_or(&end, &e.to_string());
                    m.error = Some(e.to_string());
                    Ok(m)
                }
                Err(e) => Err(e),
            }
        })
    });
    let ended = ended
        .map(|e| (e.outcome, e.error))
        .map_err(|e| e.to_string());
    outcome_result(&cmdline, &notes, ended, late.then_some(limit))
}

/// The one-test server, bounded; its test's outcome through the run
/// contract.
pub fn run_server(s: &ThroughputSpec, port: u16, auth: Option<&TaskAuth>) -> ThroughputResult {
    // The users file's directory (0700), removed when the run ends.
    let dir = match tempfile::Builder::new()
        .prefix("linerate-pscheduler-")
        .tempdir()
    {
        Ok(d) => d,
        Err(e) => return ThroughputResult::failed(format!("cannot make a directory: {e}"), ""),
    };
    let planned = plan::server(s, port, auth.map(|a| (a, dir.path())))
        .and_then(|p| Ok((p, server_limit_s(s).map_err(|e| e.to_string())?)));
    let (plan, limit) = match planned {
        Ok(p) => p,
        Err(e) => return ThroughputResult::failed(e, ""),
    };
    let kept = KeepEnd::default();
    let opts = ServerOptions {
        events: Some(SharedReporter::new(kept.clone())),
        ..plan.opts
    };
    let stop = Arc::new(AtomicBool::new(false));
    let out: linerate_iperf::server::Out = Arc::new(Mutex::new(std::io::sink()));
    let (served, late) = bounded(limit, &stop, || {
        linerate_iperf::server::run(&opts, out, stop.clone())
    });
    let ended = match (served, kept.take()) {
        (_, Some(k)) => Ok(k),
        (Err(e), None) => Err(format!("server on port {port}: {e}")),
        (Ok(()), None) if !late => {
            let head = [plan.notes.clone(), vec![plan.cmdline.clone()]].concat();
            return ThroughputResult::failed(NO_CLIENT, head.join("\n"));
        }
        (Ok(()), None) => Err("the server saw no test".to_string()),
    };
    outcome_result(&plan.cmdline, &plan.notes, ended, late.then_some(limit))
}

/// loopback: participant 0 runs the server and the client; the client's
/// result, else the server's.
fn run_loopback(s: &ThroughputSpec, port: u16) -> ThroughputResult {
    let (client, server) = std::thread::scope(|scope| {
        let server = scope.spawn(|| run_server(s, port, None));
        std::thread::sleep(Duration::from_secs_f64(WAIT_SLEEP_S));
        let client = run_client(s, port, None);
        let server = server
            .join()
            .unwrap_or_else(|_| ThroughputResult::failed("the server's thread failed", ""));
        (client, server)
    });
    let said = |r: &ThroughputResult| r.error.clone().unwrap_or_else(|| "No error.".into());
    let diags = |r: &ThroughputResult| {
        r.diags
            .clone()
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| "No diagnostics.".into())
    };
    let all = format!(
        "Client:\n\n{}\n\nServer:\n\n{}",
        diags(&client),
        diags(&server)
    );
    let mut out = if client.succeeded {
        client
    } else if server.succeeded {
        server
    } else {
        ThroughputResult::failed(
            format!(
                "Client:\n\n{}\n\nServer:\n\n{}",
                said(&client),
                said(&server)
            ),
            "",
        )
    };
    out.diags = Some(all);
    out
}

/// The server's port: single-ended's, loopback's from the configuration,
/// else participant 1's data.
fn server_port(
    data: &[ParticipantData],
    s: &ThroughputSpec,
    configured: u16,
) -> Result<u16, Error> {
    if s.single_ended {
        return Ok(s
            .single_ended_port
            .unwrap_or(crate::config::DEFAULT_SERVER_PORT));
    }
    if s.loopback {
        return Ok(configured);
    }
    let p = data
        .get(1)
        .and_then(|d| d.server_port.as_ref())
        .ok_or(Error::Missing("participant-data[1].server_port"))?;
    p.as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)
        .ok_or_else(|| {
            bad(
                "participant-data[1].server_port",
                format!("{p} is not a port"),
            )
        })
}

/// The throughput run of this participant.
pub fn run(
    r: &RunInput,
    s: &ThroughputSpec,
    configured_port: u16,
) -> Result<ThroughputResult, Error> {
    let alone = s.single_ended || s.loopback;
    let data = r.data()?;
    let expected = if alone { 1 } else { 2 };
    if data.len() != expected {
        return Err(bad(
            "participant-data",
            format!(
                "this throughput test has {expected} participant(s), the input {}",
                data.len()
            ),
        ));
    }
    let port = server_port(data, s, configured_port)?;
    // As the iperf3 tool: the client authenticates when participant 1 made
    // credentials; the server asks for them when participant 0 can give
    // them (its data's schema 2 or later).
    let auth = data.get(1).filter(|_| !alone).and_then(|d| d.auth.as_ref());
    let client_can = data.first().and_then(|d| d.schema).unwrap_or(1) >= 2;
    match r.participant()? {
        0 if s.loopback => {
            r.sleep_until_start()?;
            Ok(run_loopback(s, port))
        }
        0 => {
            r.sleep_until_start()?;
            std::thread::sleep(Duration::from_secs_f64(WAIT_SLEEP_S));
            Ok(run_client(s, port, auth))
        }
        1 if !alone => {
            r.sleep_until_start()?;
            Ok(run_server(s, port, auth.filter(|_| client_can)))
        }
        p => Err(bad(
            "participant",
            format!("{p} is not a participant of this test"),
        )),
    }
}
