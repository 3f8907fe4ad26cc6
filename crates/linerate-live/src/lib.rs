//! `--live`: a terminal view of any run, fed by the run model's events
//! (written once; no mode has view code of its own).
//!
//! One row per stream / flow / worker (rate in bit/s and packets/s, loss,
//! reordered, latency p50/p99 where measured), the totals, a sparkline of
//! the total rate, elapsed and remaining time, and the run's settings on
//! top. `q` or Ctrl-C raises SIGINT, which every mode already takes as
//! "stop cleanly": the run ends, the terminal is given back, and the
//! normal end report follows.

use linerate_run::{Event, Reporter, Row};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Row as TRow, Sparkline, Table};
use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the view shows, updated by the events.
#[derive(Default)]
struct State {
    mode: String,
    settings: String,
    planned_s: Option<f64>,
    started: Option<Instant>,
    rows: Vec<Row>,
    sums: Vec<Row>,
    seconds: f64,
    /// Total rate of each interval, bit/s (or packets/s where bits are
    /// not counted).
    history: Vec<u64>,
    history_unit: &'static str,
    intervals: usize,
    error: Option<String>,
    /// What a server's view says between tests.
    note: Option<String>,
}

/// The live view: a reporter that draws on the terminal from a thread of
/// its own (so elapsed time moves between intervals and keys are read).
pub struct LiveView {
    state: Arc<Mutex<State>>,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Where the end report goes once the terminal is given back.
    end_text: bool,
    /// A server's view: stays up across runs (tests); the last run's end
    /// text is printed when it closes.
    persistent: bool,
    last_text: Option<String>,
    /// Where that text goes (standard output, checked by the caller).
    out: Box<dyn Write + Send>,
    /// Standard error held back while the view is up (a notice written
    /// under it would tear the screen): shown in the view's last line,
    /// printed whole when the view closes.
    stderr: Option<linerate_backend::term::StderrCapture>,
}

impl std::fmt::Debug for LiveView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiveView")
    }
}

/// Whether `--live` can draw here; if not, says why on stderr (once a
/// run: a server asks at every test).
pub fn available(warn_once: impl FnOnce(&'static str)) -> bool {
    if io::stdout().is_terminal() {
        return true;
    }
    warn_once(
        "linerate: --live needs a terminal on standard output; printing interval lines instead",
    );
    false
}

impl LiveView {
    /// `end_text`: print the mode's human end report when the view closes
    /// (the text reporter is not in use while the view is up).
    pub fn new(end_text: bool, out: Box<dyn Write + Send>) -> Self {
        LiveView {
            state: Arc::new(Mutex::new(State::default())),
            done: Arc::new(AtomicBool::new(false)),
            thread: None,
            end_text,
            persistent: false,
            last_text: None,
            out,
            stderr: None,
        }
    }

    /// A view that stays up across runs (a server's tests) until dropped.
    pub fn persistent(out: Box<dyn Write + Send>) -> Self {
        let mut l = LiveView::new(true, out);
        l.persistent = true;
        if let Ok(mut st) = l.state.lock() {
            st.mode = "server".into();
            st.started = Some(Instant::now());
            st.note = Some("waiting for the first test".into());
        }
        // Up from the start: the server waits for its tests in the view.
        if let Err(e) = l.open() {
            eprintln!("linerate: --live: {e}");
        }
        l
    }

    fn open(&mut self) -> io::Result<()> {
        use crossterm::terminal::{EnterAlternateScreen, enable_raw_mode};
        enable_raw_mode()?;
        crossterm::execute!(io::stdout(), EnterAlternateScreen)?;
        let mut term = Terminal::new(CrosstermBackend::new(io::stdout()))?;
        // Only a terminal needs it: stderr sent to a file tears nothing.
        if io::stderr().is_terminal() {
            self.stderr = linerate_backend::term::StderrCapture::start().ok();
        }
        let notices = self.stderr.as_ref().map(|c| c.shared());
        let (state, done) = (self.state.clone(), self.done.clone());
        self.thread = Some(std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                let notice = notices
                    .as_ref()
                    .and_then(|n| n.lock().ok().and_then(|l| l.lines.back().cloned()));
                if let Ok(s) = state.lock() {
                    let _ = term.draw(|f| draw(f, &s, notice.as_deref()));
                }
                // Keys: q, Esc or Ctrl-C stop the run the way SIGINT does.
                if crossterm::event::poll(Duration::from_millis(200)).unwrap_or(false)
                    && let Ok(crossterm::event::Event::Key(k)) = crossterm::event::read()
                {
                    use crossterm::event::{KeyCode, KeyModifiers};
                    let ctrl_c =
                        k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                    if ctrl_c || matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) {
                        let _ = signal_hook::low_level::raise(signal_hook::consts::SIGINT);
                    }
                }
            }
        }));
        Ok(())
    }

    /// Gives the terminal back (idempotent).
    fn close(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
            use crossterm::terminal::{LeaveAlternateScreen, disable_raw_mode};
            let _ = crossterm::execute!(io::stdout(), LeaveAlternateScreen);
            let _ = disable_raw_mode();
        }
        // What was written to stderr under the view, now on the terminal.
        if let Some(c) = self.stderr.take() {
            let kept = c.finish();
            if kept.dropped > 0 {
                eprintln!(
                    "linerate: ({} earlier lines of stderr not kept)",
                    kept.dropped
                );
            }
            for l in kept.lines {
                eprintln!("{l}");
            }
        }
    }
}

impl Drop for LiveView {
    fn drop(&mut self) {
        let was_open = self.thread.is_some();
        self.close();
        if was_open && let Some(t) = self.last_text.take() {
            let _ = self.out.write_all(t.as_bytes());
            let _ = self.out.flush();
        }
    }
}

/// The run's planned length, when it has one.
fn planned(s: &linerate_run::Start) -> Option<f64> {
    s.planned_s.filter(|t| *t > 0.0)
}

fn settings(config: &serde_json::Value) -> String {
    let Some(m) = config.as_object() else {
        return String::new();
    };
    m.iter()
        // Scalars and non-empty lists: the settings a person reads.
        .filter(|(_, v)| match v {
            serde_json::Value::Null | serde_json::Value::Object(_) => false,
            serde_json::Value::Array(a) => !a.is_empty(),
            _ => true,
        })
        .map(|(k, v)| format!("{k}={}", v.to_string().trim_matches('"')))
        .collect::<Vec<_>>()
        .join("  ")
}

impl Reporter for LiveView {
    fn report(&mut self, ev: &Event) -> io::Result<()> {
        match ev {
            Event::Start(s) => {
                if let Ok(mut st) = self.state.lock() {
                    // A new run (a server's next test) starts afresh.
                    *st = State {
                        mode: s.mode.name().to_string(),
                        settings: settings(&s.config),
                        planned_s: planned(s),
                        started: Some(Instant::now()),
                        ..State::default()
                    };
                }
                if self.thread.is_none() {
                    self.open()?;
                }
            }
            Event::Interval(i) => {
                if let Ok(mut st) = self.state.lock() {
                    st.rows = i.rows.clone();
                    st.sums = i.sums.clone();
                    st.seconds = i.seconds();
                    st.intervals += 1;
                    let (bps, pps) = i.sums.iter().map(|r| r.rates(i.seconds())).fold(
                        (None, None),
                        |(b, p), (rb, rp)| {
                            (
                                rb.map(|x| b.unwrap_or(0.0) + x).or(b),
                                rp.map(|x| p.unwrap_or(0.0) + x).or(p),
                            )
                        },
                    );
                    let (v, unit) = match (bps, pps) {
                        (Some(b), _) => (b, "bit/s"),
                        (None, Some(p)) => (p, "packets/s"),
                        _ => (0.0, "bit/s"),
                    };
                    st.history.push(v as u64);
                    st.history_unit = unit;
                }
            }
            Event::Error(e) => {
                if let Ok(mut st) = self.state.lock() {
                    st.error = Some(e.clone());
                }
            }
            Event::End(e) if self.persistent => {
                if let Ok(mut st) = self.state.lock() {
                    st.note = Some(format!(
                        "the last test ended after {:.1} s; waiting for the next",
                        e.duration_s
                    ));
                }
                self.last_text = Some(e.outcome.text());
            }
            Event::End(e) => {
                self.close();
                if self.end_text {
                    let mut out = io::stdout();
                    out.write_all(e.outcome.text().as_bytes())?;
                    out.flush()?;
                }
            }
        }
        Ok(())
    }
}

fn rate(v: Option<f64>, unit: &str) -> String {
    v.map_or_else(
        || "-".into(),
        |x| linerate_run::report::format_rate(x, unit),
    )
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), |x| x.to_string())
}

fn us(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), |ns| format!("{:.1} µs", ns as f64 / 1e3))
}

fn table_row(r: &Row, secs: f64, bold: bool) -> TRow<'static> {
    let (bps, pps) = r.rates(secs);
    let c = &r.counts;
    let cells = vec![
        format!("{} {}", r.scope.name(), r.id),
        r.role.clone(),
        r.counted_by.name().to_string(),
        rate(bps, "bit/s"),
        rate(pps, "pps"),
        opt(c.lost),
        opt(c.reordered),
        us(r.gauges.latency_p50_ns),
        us(r.gauges.latency_p99_ns),
    ];
    let row = TRow::new(cells);
    if bold {
        row.style(Style::default().add_modifier(Modifier::BOLD))
    } else {
        row
    }
}

fn draw(f: &mut ratatui::Frame, s: &State, notice: Option<&str>) {
    let area = f.area();
    let [head, table, spark, foot] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Min(5),
        Constraint::Length(5),
        Constraint::Length(2),
    ])
    .areas(area);
    let elapsed = s.started.map_or(0.0, |t| t.elapsed().as_secs_f64());
    let time = match s.planned_s {
        Some(p) => format!(
            "{elapsed:.1} s of {p:.0} s, {:.1} s left",
            (p - elapsed).max(0.0)
        ),
        None => format!("{elapsed:.1} s"),
    };
    let header = Paragraph::new(vec![
        Line::from(format!(
            "linerate {}  —  {time}  —  intervals: {}",
            s.mode, s.intervals
        )),
        Line::from(s.settings.clone()),
    ])
    .block(Block::default().borders(Borders::ALL).title("run"));
    f.render_widget(header, head);
    let widths = [
        Constraint::Length(14),
        Constraint::Length(12),
        Constraint::Length(10),
        Constraint::Length(16),
        Constraint::Length(14),
        Constraint::Length(9),
        Constraint::Length(9),
        Constraint::Length(11),
        Constraint::Length(11),
    ];
    let shown = (table.height as usize).saturating_sub(3 + s.sums.len());
    let mut rows: Vec<TRow> = s
        .rows
        .iter()
        .take(shown)
        .map(|r| table_row(r, s.seconds, false))
        .collect();
    if s.rows.len() > shown {
        rows.push(TRow::new(vec![format!("… {} more", s.rows.len() - shown)]));
    }
    rows.extend(s.sums.iter().map(|r| table_row(r, s.seconds, true)));
    let t = Table::new(rows, widths)
        .header(
            TRow::new(vec![
                "row",
                "role",
                "counted by",
                "rate",
                "packets",
                "lost",
                "reordered",
                "p50",
                "p99",
            ])
            .style(Style::default().add_modifier(Modifier::UNDERLINED)),
        )
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title("last interval"),
        );
    f.render_widget(t, table);
    let last = s.history.last().map_or(0.0, |v| *v as f64);
    let spark_title = format!(
        "total rate, {} intervals (now {})",
        s.history.len(),
        linerate_run::report::format_rate(last, s.history_unit)
    );
    let width = spark.width.saturating_sub(2) as usize;
    let data: Vec<u64> = s.history.iter().rev().take(width).rev().copied().collect();
    f.render_widget(
        Sparkline::default()
            .block(Block::default().borders(Borders::ALL).title(spark_title))
            .data(&data),
        spark,
    );
    let footer = match (&s.error, &s.note) {
        (Some(e), _) => format!("error: {e}   —   q or Ctrl-C: stop"),
        (None, Some(n)) => format!("{n}   —   q or Ctrl-C: stop the server"),
        (None, None) => "q or Ctrl-C: stop the run (the end report follows)".into(),
    };
    let [notice_area, foot] =
        Layout::vertical([Constraint::Length(1), Constraint::Length(1)]).areas(foot);
    if let Some(n) = notice {
        f.render_widget(Paragraph::new(format!("stderr: {n}")), notice_area);
    }
    f.render_widget(Paragraph::new(footer), foot);
}

/// Without `--live`: a one-line progress on stderr (elapsed, planned, the
/// total rate) for runs whose standard output is not showing interval
/// lines on the same terminal (redirected, or JSON). Cleared at the end.
#[derive(Debug, Default)]
pub struct Progress {
    started: Option<Instant>,
    planned_s: Option<f64>,
}

impl Progress {
    /// Whether a progress line makes sense here: stderr is a terminal and
    /// stdout is not printing interval lines on it.
    pub fn wanted(human_on_stdout: bool) -> bool {
        io::stderr().is_terminal() && !(human_on_stdout && io::stdout().is_terminal())
    }
}

/// The progress line's figures: each sum row's rates with its role and
/// who counted it (a sender's and a receiver's count are never added).
fn progress_figures(sums: &[linerate_run::Row], secs: f64) -> String {
    sums.iter()
        .map(|r| {
            let (b, p) = r.rates(secs);
            let mut f = vec![r.role.clone()];
            if let Some(b) = b {
                f.push(linerate_run::report::format_rate(b, "bit/s"));
            }
            if let Some(p) = p {
                f.push(linerate_run::report::format_rate(p, "pps"));
            }
            format!("{} ({})", f.join(" "), r.counted_by.name())
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl Reporter for Progress {
    fn report(&mut self, ev: &Event) -> io::Result<()> {
        let mut err = io::stderr();
        match ev {
            Event::Start(s) => {
                self.started = Some(Instant::now());
                self.planned_s = planned(s);
            }
            Event::Interval(i) => {
                let elapsed = self.started.map_or(0.0, |t| t.elapsed().as_secs_f64());
                let of = self
                    .planned_s
                    .map_or(String::new(), |p| format!(" of {p:.0} s"));
                let _ = write!(
                    err,
                    "\r\x1b[K{elapsed:.0} s{of}: {}",
                    progress_figures(&i.sums, i.seconds())
                );
                let _ = err.flush();
            }
            Event::End(_) => {
                let _ = write!(err, "\r\x1b[K");
                let _ = err.flush();
            }
            Event::Error(_) => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_progress_line_keeps_each_count_apart_and_names_who_counted() {
        use linerate_run::{CountedBy, Counts, Row, Scope};
        let row = |role: &str, by: CountedBy, packets: u64| {
            Row::new(Scope::Sum, "SUM", role, by).with_counts(Counts {
                packets: Some(packets),
                bytes: Some(packets * 100),
                ..Counts::default()
            })
        };
        let line = crate::progress_figures(
            &[
                row("tx", CountedBy::Sender, 1000),
                row("rx", CountedBy::Receiver, 900),
            ],
            1.0,
        );
        assert!(line.starts_with("tx "), "{line}");
        assert!(line.contains("(sender), rx "), "{line}");
        assert!(line.ends_with("(receiver)"), "{line}");
    }
}
