//! Whether the UDP path sends GSO batches on an interface: `--gso auto`
//! turns them off where a whole batch would reach a receiver as one frame
//! (a veth that does not split them, a loopback's packet taps).

/// Whether UDP GSO is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Gso {
    /// On, except on a veth whose tx-udp-segmentation is on: it would hand
    /// a GSO batch to its peer as one packet.
    #[default]
    Auto,
    On,
    Off,
}

/// Whether the UDP path sends GSO batches on `iface` (`--gso`), and the
/// note that says why not where auto turned them off.
pub(super) fn choice(iface: &str, gso: Gso) -> (bool, Option<String>) {
    let driver = crate::ethtool::drvinfo(iface)
        .map(|d| d.driver)
        .unwrap_or_default();
    // A veth that segments in software (tx-udp-segmentation off) hands
    // its peer real datagrams.
    let veth_splits = driver == "veth"
        && crate::ethtool::feature(iface, "tx-udp-segmentation")
            .ok()
            .flatten()
            == Some(false);
    match gso {
        Gso::On => (true, None),
        Gso::Off => (false, Some("GSO off (--gso off)".to_string())),
        Gso::Auto if driver == "veth" && !veth_splits => (
            false,
            Some(format!(
                "GSO off on veth (it hands a GSO batch to its peer as one packet); \
                 `ethtool -K {iface} tx-udp-segmentation off` lets the kernel split them (and turns GSO on)"
            )),
        ),
        // The kernel taps a loopback's frames before it splits a GSO
        // batch: a packet socket on it (a sink's) sees one frame.
        Gso::Auto
            if crate::iface::is_loopback(iface).unwrap_or(false)
                && crate::ethtool::feature(iface, "tx-udp-segmentation")
                    .ok()
                    .flatten()
                    != Some(false) =>
        {
            (
                false,
                Some(
                    "GSO off on loopback (a packet socket on it, a sink's, sees a GSO batch as one frame); \
                     --gso on for the sender's own figure"
                        .to_string(),
                ),
            )
        }
        Gso::Auto => (true, None),
    }
}
