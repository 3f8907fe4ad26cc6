//! The one way every mode runs: `Start`, the mode's body (which reports
//! each interval as it ends), then `End` with the body's typed outcome, or
//! an error and an empty end when the body fails before it measured
//! anything; and the repetition of a run until the policy stops it.

use crate::event::{End, Event, Host, Interval, Mode, Row, Start, sums};
use crate::outcome::{Failed, Figure, SharedOutcome};
use crate::report::Reporter;
use crate::stats::{Policy, Stop};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// One run on its way through the reporters.
pub struct Run {
    rep: Arc<Mutex<Box<dyn Reporter>>>,
    warned: bool,
    /// Its `Start` was reported (by the run, or by its engine when the run
    /// is [`drive_engine`]'s and the engine alone knows its settings).
    started: Arc<AtomicBool>,
}

/// The end an engine reported through [`Run::engine`], kept for the body
/// to return as what it measured.
#[derive(Debug, Clone, Default)]
pub struct EngineEnd(Arc<Mutex<EngineKept>>);

#[derive(Debug, Default)]
struct EngineKept {
    end: Option<End>,
    error: Option<String>,
}

impl EngineEnd {
    /// What the engine measured: its end's rows and outcome, and the error
    /// it reported (`None`: it never reached its end).
    pub fn measured(&self) -> Option<Measured> {
        let k = self.0.lock().ok()?;
        let end = k.end.as_ref()?;
        Some(Measured {
            duration_s: end.duration_s,
            rows: end.rows.clone(),
            outcome: end.outcome.clone(),
            error: k.error.clone(),
        })
    }

    /// The error the engine reported, whether or not it reached its end.
    pub fn error(&self) -> Option<String> {
        self.0.lock().ok()?.error.clone()
    }
}

/// The reporter an engine is given: its intervals go to the run's
/// reporters as it reports them; its start is the run's (already said, or
/// the engine's when the run had none to say), its error and end are kept
/// for the run's end.
struct Engine {
    rep: Arc<Mutex<Box<dyn Reporter>>>,
    started: Arc<AtomicBool>,
    kept: EngineEnd,
}

impl Reporter for Engine {
    fn report(&mut self, ev: &Event) -> std::io::Result<()> {
        match ev {
            Event::Start(_) if self.started.swap(true, Ordering::AcqRel) => Ok(()),
            Event::Start(_) | Event::Interval(_) => match self.rep.lock() {
                Ok(mut r) => r.report(ev),
                Err(_) => Ok(()),
            },
            Event::Error(e) => {
                if let Ok(mut k) = self.kept.0.lock() {
                    k.error = Some(e.clone());
                }
                Ok(())
            }
            Event::End(end) => {
                if let Ok(mut k) = self.kept.0.lock() {
                    k.end = Some((**end).clone());
                }
                Ok(())
            }
        }
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Run")
    }
}

/// What a mode's body measured: the totals' rows, its outcome, and the
/// error that stopped it part-way, if one did (what it measured stands).
#[derive(Debug, Clone)]
pub struct Measured {
    pub duration_s: f64,
    pub rows: Vec<Row>,
    pub outcome: SharedOutcome,
    pub error: Option<String>,
}

/// How a run ended: the exit code it calls for (0 ok, 1 failed part-way,
/// 2 could not run) and its outcome.
#[derive(Debug, Clone)]
pub struct Ended {
    pub exit_code: u8,
    pub outcome: SharedOutcome,
    /// The error that stopped the run part-way, if one did.
    pub error: Option<String>,
}

impl Ended {
    /// The figure a repetition measures, from an ended run that succeeded.
    pub fn figure(&self) -> Option<Figure> {
        (self.exit_code == 0)
            .then(|| self.outcome.figure())
            .flatten()
    }
}

impl Run {
    /// Reports the start (of a run with no planned length).
    pub fn start(rep: Box<dyn Reporter>, mode: Mode, config: Value, doctor: Option<Value>) -> Self {
        Run::start_planned(rep, mode, config, doctor, None)
    }

    /// Reports the start of a run planned to last `planned_s` seconds.
    pub fn start_planned(
        rep: Box<dyn Reporter>,
        mode: Mode,
        config: Value,
        doctor: Option<Value>,
        planned_s: Option<f64>,
    ) -> Self {
        let mut r = Run::unstarted(rep);
        r.started.store(true, Ordering::Release);
        r.emit(&Event::Start(Box::new(Start {
            mode,
            config,
            planned_s,
            doctor,
            host: Host::here(),
        })));
        r
    }

    fn unstarted(rep: Box<dyn Reporter>) -> Self {
        Run {
            rep: Arc::new(Mutex::new(rep)),
            warned: false,
            started: Arc::new(AtomicBool::new(false)),
        }
    }

    /// For an engine that reports its own events from threads of its own
    /// (the iperf3 client: its sans-IO report makes a test's events): the
    /// reporter to give it, through which its intervals reach this run's
    /// reporters as they end, and where its error and end are kept for the
    /// body to return ([`EngineEnd::measured`]). The run's own start and
    /// end stand for the engine's.
    pub fn engine(&mut self) -> (crate::SharedReporter, EngineEnd) {
        let kept = EngineEnd::default();
        let engine = Engine {
            rep: self.rep.clone(),
            started: self.started.clone(),
            kept: kept.clone(),
        };
        (crate::SharedReporter::new(engine), kept)
    }

    fn emit(&mut self, ev: &Event) {
        let written = match self.rep.lock() {
            Ok(mut r) => r.report(ev),
            Err(_) => Ok(()),
        };
        if let Err(e) = written
            && !self.warned
        {
            // The run goes on: what it measures still reaches the others.
            eprintln!("linerate: warning: writing the report: {e}");
            self.warned = true;
        }
    }

    /// Reports an interval as it ends.
    pub fn interval(&mut self, iv: &Interval) {
        self.emit(&Event::Interval(iv.clone()));
    }

    /// Reports the end (after the error, if the body stopped on one).
    pub fn end(mut self, m: Measured) -> Ended {
        if let Some(e) = &m.error {
            self.emit(&Event::Error(e.clone()));
        }
        let exit_code = u8::from(m.error.is_some());
        self.emit(&Event::End(Box::new(End {
            duration_s: m.duration_s,
            sums: sums(&m.rows),
            rows: m.rows,
            outcome: m.outcome.clone(),
            exit_code,
        })));
        Ended {
            exit_code,
            outcome: m.outcome,
            error: m.error,
        }
    }

    /// The run failed before it measured anything worth keeping: an error
    /// event and an empty end.
    pub fn fail(mut self, error: &str) {
        let outcome: SharedOutcome = Arc::new(Failed {
            error: error.to_string(),
        });
        self.emit(&Event::Error(error.to_string()));
        self.emit(&Event::End(Box::new(End {
            duration_s: 0.0,
            rows: Vec::new(),
            sums: Vec::new(),
            outcome,
            exit_code: 2,
        })));
    }
}

/// An error chain (`outer: cause: cause`) without the causes a message
/// already spells out: typed errors often put their source in their own
/// text, and the chain would say it twice.
pub fn without_repeats(chain: &str) -> String {
    let mut out = String::new();
    for part in chain.split(": ") {
        if out.is_empty() {
            out.push_str(part);
        } else if part.len() < 4 || !out.contains(part) {
            out.push_str(": ");
            out.push_str(part);
        }
    }
    out
}

/// Runs a mode: `Start`, then `body` (which reports intervals through the
/// run it is given), then `End` with what it measured. A body that fails
/// is reported as an error and an empty end, and its error returned.
pub fn drive<E: std::fmt::Display>(
    rep: Box<dyn Reporter>,
    mode: Mode,
    config: Value,
    doctor: Option<Value>,
    body: impl FnOnce(&mut Run) -> Result<Measured, E>,
) -> Result<Ended, E> {
    drive_planned(rep, mode, config, doctor, None, body)
}

/// [`drive`] for a run planned to last `planned_s` seconds (its `Start`
/// says so: a live view's progress).
pub fn drive_planned<E: std::fmt::Display>(
    rep: Box<dyn Reporter>,
    mode: Mode,
    config: Value,
    doctor: Option<Value>,
    planned_s: Option<f64>,
    body: impl FnOnce(&mut Run) -> Result<Measured, E>,
) -> Result<Ended, E> {
    let mut run = Run::start_planned(rep, mode, config, doctor, planned_s);
    match body(&mut run) {
        Ok(m) => Ok(run.end(m)),
        Err(e) => {
            run.fail(&without_repeats(&format!("{e:#}")));
            Err(e)
        }
    }
}

/// Runs an engine that reports its own start (an iperf3 server's test,
/// whose settings are known only after the parameter exchange with a
/// client): `body` gets the reporter to hand the engine; the engine's
/// `Start` is the run's, its intervals pass as they end, and its end (with
/// the error that stopped it, if one did) becomes the run's `End`. An
/// engine that never started (a refused client) reports nothing and ends
/// no run (`None`); one that started but never reached its end ends the run
/// with its error and an empty end (exit code 1: it ran part-way).
pub fn drive_engine<T>(
    rep: Box<dyn Reporter>,
    body: impl FnOnce(crate::SharedReporter) -> T,
) -> (T, Option<Ended>) {
    let mut run = Run::unstarted(rep);
    let (engine, kept) = run.engine();
    let out = body(engine);
    if !run.started.load(Ordering::Acquire) {
        return (out, None);
    }
    let ended = match kept.measured() {
        Some(m) => run.end(m),
        None => {
            // It ran part-way: its intervals were reported as they ended.
            let error = kept
                .error()
                .unwrap_or_else(|| "the test stopped before its end".into());
            run.end(Measured {
                duration_s: 0.0,
                rows: Vec::new(),
                outcome: Arc::new(Failed {
                    error: error.clone(),
                }),
                error: Some(error),
            })
        }
    };
    (out, Some(ended))
}

/// A finished repetition: the figure of every run (warm-up runs first),
/// every run's outcome, and why it stopped (`None`: a run failed or did not
/// measure its figure, and the runs before it stand).
#[derive(Debug, Clone)]
pub struct Repetition {
    pub values: Vec<f64>,
    pub outcomes: Vec<SharedOutcome>,
    pub stop: Option<Stop>,
    /// The measured figure's name and unit (from the first run that had one).
    pub figure: Option<(&'static str, &'static str)>,
    /// The host it ran on, at its start.
    pub host: Host,
}

/// Runs `once(n)` (n from 1) until `policy` stops, each run's figure read
/// from its typed outcome.
pub fn repeat<E>(
    policy: &Policy,
    mut once: impl FnMut(usize) -> Result<Ended, E>,
) -> Result<Repetition, E> {
    let mut rep = Repetition {
        values: Vec::new(),
        outcomes: Vec::new(),
        stop: None,
        figure: None,
        host: Host::here(),
    };
    loop {
        let ended = once(rep.values.len() + 1)?;
        // A run that failed part-way still names what was measured.
        if let Some(f) = ended.outcome.figure() {
            rep.figure.get_or_insert((f.name, f.unit));
        }
        let value = ended.figure().map(|f| f.value);
        rep.outcomes.push(ended.outcome);
        let Some(v) = value else {
            return Ok(rep);
        };
        rep.values.push(v);
        if let Some(s) = policy.stop(&rep.values) {
            rep.stop = Some(s);
            return Ok(rep);
        }
    }
}

/// A repetition's `-J`: every run's document, then the figure over them.
#[derive(Debug, serde::Serialize)]
pub struct RepeatDoc<'a> {
    pub runs: Vec<Value>,
    pub repeat: crate::stats::Report<'a>,
    /// Where and how it ran (the command, kernel, CPUs), as a native
    /// mode's `-J` ends with.
    pub host: &'a Host,
}

impl Repetition {
    /// Its one typed document (-J prints it, `--report` draws it).
    pub fn document<'a>(&'a self, policy: &'a Policy) -> RepeatDoc<'a> {
        use crate::stats::Ending;
        RepeatDoc {
            runs: self.outcomes.iter().map(|o| o.document()).collect(),
            repeat: policy.report_of(
                &self.values,
                self.stop.map_or(Ending::RUN_FAILED, Ending::from),
                self.figure.map_or("", |f| f.0),
            ),
            host: &self.host,
        }
    }

    /// Its summary for people: the figure over the runs, and why they
    /// stopped.
    pub fn line(&self, policy: &Policy) -> String {
        let unit = self.figure.map_or("", |f| f.1);
        let stopped = self.stop.unwrap_or(Stop::Count);
        crate::stats::line(&self.values, policy, stopped, unit, &|v| {
            if unit.ends_with("bit/s") {
                crate::report::format_rate(v, "bit/s")
            } else {
                format!("{v:.1}")
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_chain_says_each_cause_once() {
        assert_eq!(
            without_repeats(
                "interface nosuch0: no interface named nosuch0: no interface named nosuch0"
            ),
            "interface nosuch0: no interface named nosuch0"
        );
        assert_eq!(
            without_repeats("bind: Address in use: 0: 0"),
            "bind: Address in use: 0: 0"
        );
        assert_eq!(without_repeats("one"), "one");
    }
    use crate::outcome::Written;

    #[derive(Default, Clone)]
    struct Seen(Arc<Mutex<Vec<&'static str>>>);

    impl Reporter for Seen {
        fn report(&mut self, ev: &Event) -> std::io::Result<()> {
            self.0.lock().unwrap().push(ev.name());
            Ok(())
        }
    }

    fn outcome(v: f64) -> SharedOutcome {
        Arc::new(Written {
            document: serde_json::json!({ "v": v }),
            text: format!("{v}\n"),
            figure: Some(Figure {
                name: "v",
                unit: "u",
                value: v,
            }),
        })
    }

    #[test]
    fn an_engines_events_reach_the_run_and_its_end_is_what_the_body_measured() {
        let seen = Seen::default();
        let ended = drive::<String>(
            Box::new(seen.clone()),
            Mode::Client,
            Value::Null,
            None,
            |run| {
                let (engine, end) = run.engine();
                // From another thread, as the iperf3 engine reports.
                std::thread::spawn(move || {
                    engine.report(&Event::Start(Box::new(Start {
                        mode: Mode::Client,
                        config: Value::Null,
                        planned_s: None,
                        doctor: None,
                        host: Host::here(),
                    })));
                    engine.report(&Event::Interval(Interval::new(0.0, 1.0, Vec::new())));
                    engine.report(&Event::Error("peer gone".into()));
                    engine.report(&Event::End(Box::new(End {
                        duration_s: 1.5,
                        rows: Vec::new(),
                        sums: Vec::new(),
                        outcome: outcome(3.0),
                        exit_code: 1,
                    })));
                })
                .join()
                .unwrap();
                Ok(end.measured().expect("the engine's end was kept"))
            },
        )
        .unwrap();
        // One start (the run's), the engine's interval, its error once, one end.
        assert_eq!(
            *seen.0.lock().unwrap(),
            ["start", "interval", "error", "end"]
        );
        assert_eq!(ended.exit_code, 1);
        assert_eq!(ended.error.as_deref(), Some("peer gone"));
        assert_eq!(ended.outcome.text(), "3\n");
        // An engine that never reached its end measured nothing.
        let mut run = Run::start(Box::new(Seen::default()), Mode::Client, Value::Null, None);
        assert!(run.engine().1.measured().is_none());
    }

    fn engine_start() -> Event {
        Event::Start(Box::new(Start {
            mode: Mode::Server,
            config: serde_json::json!({ "from": "engine" }),
            planned_s: None,
            doctor: None,
            host: Host::here(),
        }))
    }

    #[test]
    fn an_engine_that_says_its_own_start_is_a_run_and_one_that_never_starts_is_none() {
        let seen = Seen::default();
        let (n, ended) = drive_engine(Box::new(seen.clone()), |engine| {
            std::thread::spawn(move || {
                engine.report(&engine_start());
                engine.report(&engine_start());
                engine.report(&Event::Interval(Interval::new(0.0, 1.0, Vec::new())));
                engine.report(&Event::End(Box::new(End {
                    duration_s: 1.0,
                    rows: Vec::new(),
                    sums: Vec::new(),
                    outcome: outcome(5.0),
                    exit_code: 0,
                })));
            })
            .join()
            .unwrap();
            7
        });
        assert_eq!(n, 7);
        // The engine's start once, its interval, the run's end.
        assert_eq!(*seen.0.lock().unwrap(), ["start", "interval", "end"]);
        let ended = ended.expect("a started engine ends a run");
        assert_eq!(ended.exit_code, 0);
        assert_eq!(ended.figure().map(|f| f.value), Some(5.0));

        let seen = Seen::default();
        let (_, ended) = drive_engine(Box::new(seen.clone()), |_| ());
        assert!(ended.is_none());
        assert!(seen.0.lock().unwrap().is_empty());

        let seen = Seen::default();
        let (_, ended) = drive_engine(Box::new(seen.clone()), |engine| {
            engine.report(&engine_start());
            engine.report(&Event::Error("control connection lost".into()));
        });
        let ended = ended.unwrap();
        assert_eq!(ended.exit_code, 1);
        assert_eq!(ended.error.as_deref(), Some("control connection lost"));
        assert_eq!(*seen.0.lock().unwrap(), ["start", "error", "end"]);
    }

    #[test]
    fn drive_reports_start_intervals_and_end_or_error_and_empty_end() {
        let seen = Seen::default();
        let ended = drive::<String>(
            Box::new(seen.clone()),
            Mode::Sink,
            Value::Null,
            None,
            |run| {
                run.interval(&Interval::new(0.0, 1.0, Vec::new()));
                Ok(Measured {
                    duration_s: 1.0,
                    rows: Vec::new(),
                    outcome: outcome(7.0),
                    error: Some("link down".into()),
                })
            },
        )
        .unwrap();
        assert_eq!(ended.exit_code, 1);
        // a run that failed part-way measured something, but no figure
        assert_eq!(ended.figure(), None);
        assert_eq!(ended.outcome.text(), "7\n");
        assert_eq!(
            *seen.0.lock().unwrap(),
            ["start", "interval", "error", "end"]
        );
        let seen = Seen::default();
        let e = drive(
            Box::new(seen.clone()),
            Mode::Sink,
            Value::Null,
            None,
            |_| Err::<Measured, _>("no such interface"),
        );
        assert_eq!(e.unwrap_err(), "no such interface");
        assert_eq!(*seen.0.lock().unwrap(), ["start", "error", "end"]);
    }

    #[test]
    fn repeat_reads_each_runs_typed_figure_and_stops_on_a_failed_run() {
        let policy = Policy {
            runs: Some(3),
            confidence: 0.95,
            ci_target: None,
            max_runs: 20,
            warmup_runs: 1,
        };
        let r = repeat::<()>(&policy, |n| {
            Ok(Ended {
                exit_code: 0,
                outcome: outcome(n as f64),
                error: None,
            })
        })
        .unwrap();
        assert_eq!(r.values, [1.0, 2.0, 3.0, 4.0]);
        assert_eq!((r.stop, r.figure), (Some(Stop::Count), Some(("v", "u"))));
        let r = repeat::<()>(&policy, |n| {
            Ok(Ended {
                exit_code: u8::from(n == 3),
                outcome: outcome(n as f64),
                error: None,
            })
        })
        .unwrap();
        assert_eq!((r.values.len(), r.outcomes.len(), r.stop), (2, 3, None));
        // a first run that fails still names the figure
        let r = repeat::<()>(&policy, |n| {
            Ok(Ended {
                exit_code: 1,
                outcome: outcome(n as f64),
                error: Some("link down".into()),
            })
        })
        .unwrap();
        assert_eq!((r.values.len(), r.figure), (0, Some(("v", "u"))));
    }

    /// A start's planned length and its stream form.
    type Said = (Option<f64>, Value);

    /// What each start said.
    #[derive(Clone, Default)]
    struct Planned(Arc<Mutex<Vec<Said>>>);

    impl Reporter for Planned {
        fn report(&mut self, ev: &Event) -> std::io::Result<()> {
            if let Event::Start(s) = ev {
                self.0.lock().unwrap().push((s.planned_s, ev.json()));
            }
            Ok(())
        }
    }

    #[test]
    fn a_runs_planned_length_is_its_starts_typed_field() {
        let seen = Planned::default();
        let m = || Measured {
            duration_s: 1.0,
            rows: Vec::new(),
            outcome: outcome(1.0),
            error: None,
        };
        let config = serde_json::json!({ "time_s": 9.0 });
        drive_planned::<String>(
            Box::new(seen.clone()),
            Mode::Blast,
            config.clone(),
            None,
            Some(2.5),
            |_| Ok(m()),
        )
        .unwrap();
        // The settings' own keys are not read for it.
        drive::<String>(Box::new(seen.clone()), Mode::Blast, config, None, |_| {
            Ok(m())
        })
        .unwrap();
        let got = seen.0.lock().unwrap().clone();
        assert_eq!((got[0].0, got[1].0), (Some(2.5), None));
        // The stream's start event is unchanged: mode, config, doctor, host.
        let keys: Vec<&str> = (got[0].1["data"].as_object().unwrap().keys())
            .map(String::as_str)
            .collect();
        assert_eq!(keys.len(), 4, "{keys:?}");
        assert!(!keys.contains(&"planned_s"), "{keys:?}");
    }
}
