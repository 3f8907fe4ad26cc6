//! RFC 2544's trials with a traffic profile (`rfc2544 --profile`): each
//! trial sends every stream of the profile for the trial's time with its
//! rate scaled by one factor, the trial's rate over the profile's own
//! (`Profile::nominal`), so the search finds how far the whole mix can be
//! scaled, its streams' shares and patterns kept.

use crate::rfc2544::{TrialCounts, TrialRunner, TrialSpec, rx_packets, trial_sink};
use crate::{ProfileConfig, blast_profile};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Runs a profile's trials from one port to the other through the device.
#[derive(Debug, Clone)]
pub struct ProfileRunner {
    /// The sender's configuration at the profile's own rates (scale 1);
    /// its streams run for the trial's time (`Profile::for_trials`).
    pub sender: ProfileConfig,
    /// Frames per second the profile's rates add up to.
    pub nominal_fps: f64,
    pub rx_iface: String,
    pub rx_backend: linerate_backend::port::BackendKind,
    pub drain: Duration,
    pub clocks_shared: bool,
    pub stop: Arc<AtomicBool>,
    /// Traffic at the trial's rate before each trial, not counted.
    pub warmup: Duration,
}

impl ProfileRunner {
    /// The sender of a trial at `rate_fps` for `time`.
    fn sender(&self, rate_fps: f64, time: Duration) -> ProfileConfig {
        ProfileConfig {
            scale: rate_fps / self.nominal_fps.max(1e-9),
            duration: time,
            end_markers: false,
            interval: None,
            ..self.sender.clone()
        }
    }
}

impl TrialRunner for ProfileRunner {
    fn interrupted(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn run(&mut self, spec: &TrialSpec) -> Result<TrialCounts, String> {
        if self.stop.load(Ordering::Relaxed) {
            return Err("interrupted".into());
        }
        if spec.frames.is_some() {
            return Err(
                "back-to-back sends a count of frames of one size: it does not take a profile"
                    .into(),
            );
        }
        let send_err = |e| format!("sending on {}: {e}", self.sender.iface);
        if !self.warmup.is_zero() {
            blast_profile(
                &self.sender(spec.rate_fps, self.warmup),
                &self.stop,
                &mut |_| {},
            )
            .map_err(send_err)?;
            std::thread::sleep(self.drain);
        }
        let sink = trial_sink(
            &self.rx_iface,
            (self.rx_backend, &self.sender.wires),
            self.clocks_shared,
            spec,
            self.drain,
        );
        let cfg = self.sender(spec.rate_fps, spec.duration);
        let before = rx_packets(&self.rx_iface);
        let (sent, mut got) = crate::pair::while_counting(
            std::slice::from_ref(&sink),
            self.drain,
            || blast_profile(&cfg, &self.stop, &mut |_| {}),
            |_| true,
        )?;
        let b = sent.map_err(send_err)?;
        let r = got.remove(0)?;
        let rx_iface_packets = before
            .zip(rx_packets(&self.rx_iface))
            .map(|(a, b)| b.saturating_sub(a));
        Ok(TrialCounts::of(&b, &r, rx_iface_packets))
    }
}
