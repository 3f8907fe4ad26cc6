//! What ends a test on the server besides its client: intervals, the idle
//! receive timeout, the grace timer, waits that never end, and the rate
//! limit judged over its window.

use super::*;

impl TestServer<'_> {
    /// The bytes the streams moved (both directions) over the last rate
    /// window (or since the test began, when it is younger) and the span
    /// they were moved in; `None` without a rate limit. Judged against a
    /// window's allowance as they arrive: a client far above the limit is
    /// cut within a fraction of the window, not after a whole one.
    fn moved(&mut self, total: u64) -> Option<(u64, Duration)> {
        let window = self
            .env
            .opts
            .limits
            .rate_window
            .max(Duration::from_millis(100));
        self.env.opts.limits.max_rate_bps?;
        let now = Instant::now();
        if self
            .moved
            .back()
            .is_none_or(|(t, _)| now.duration_since(*t) >= Duration::from_millis(50))
        {
            self.moved.push_back((now, total));
        }
        while self.moved.len() > 2 && now.duration_since(self.moved[1].0) >= window {
            self.moved.pop_front();
        }
        let (t0, b0) = *self.moved.front()?;
        Some((total - b0, now.duration_since(t0)))
    }

    /// Intervals, the idle receive timeout, the grace timer, and waits for
    /// parameters or results that never come.
    pub(super) fn watch(&mut self) -> Next {
        let opts = self.env.opts;
        if self.ended.is_none()
            && let (Some(m), Some(rep)) = (self.meter.as_mut(), self.report.as_mut())
        {
            while let Some(samples) = m.tick(Instant::now()) {
                say(self.env.out, &rep.interval(&samples));
                forward_events(rep, self.env.events.as_ref());
            }
            let receiving = m.streams().iter().any(|s| !s.sender);
            let total = m
                .streams()
                .iter()
                .map(|s| s.bytes.load(Ordering::Relaxed))
                .sum::<u64>();
            if total != self.last_rx.0 {
                self.last_rx = (total, Instant::now());
            } else if receiving && self.last_rx.1.elapsed() > opts.rcv_timeout {
                self.session.fail(IErr::NO_MSG);
                return Next::Again;
            }
            // The test's life is bounded whatever the client does (or does
            // not send: TEST_END).
            if let (Some(p), Some(s)) = (&self.params, self.start_at)
                && s.elapsed() > opts.limits.life(p)
            {
                self.say(&format!(
                    "linerate: test from {} still running {:.1} s after its start (asked {} s + omit {} s, --server-grace {} s); ended\n",
                    net::host_of(&self.peer),
                    s.elapsed().as_secs_f64(),
                    p.time_s,
                    p.omit_s,
                    opts.limits.grace.as_secs()
                ));
                self.session.fail(IErr::SERVER_DURATION_EXPIRED);
                return Next::Again;
            }
            let window = opts.limits.rate_window.max(Duration::from_millis(100));
            if let Some((bytes, span)) = self.moved(total)
                && let Some(max) = opts.limits.max_rate_bps
                && bytes as f64 * 8.0 > max as f64 * window.as_secs_f64()
            {
                self.say(&format!(
                    "linerate: test from {} moved {bytes} bytes in {:.2} s, more than --server-bitrate-limit {max} allows in {:.1} s; ended (its source waits {} s for its next test)\n",
                    net::host_of(&self.peer),
                    span.as_secs_f64(),
                    window.as_secs_f64(),
                    opts.limits.rate_cooldown().as_secs()
                ));
                self.env.rate_cut.store(true, Ordering::Release);
                self.session.fail(IErr::TOTAL_RATE);
                return Next::Again;
            }
        } else if !self.session.accepting_streams()
            && self.phase_start.elapsed() > opts.control_timeout
        {
            self.session.fail(if self.params.is_none() {
                IErr::RECV_PARAMS
            } else {
                IErr::RECV_RESULTS
            });
            return Next::Again;
        }
        Next::Go
    }
}
