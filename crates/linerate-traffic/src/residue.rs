//! A transport checksum from its sum's residue modulo 0xffff, and the
//! next frame's from this one's: a run of one flow's frames, whose sums
//! rise by one with the sequence, moves its checksum by a compare and a
//! subtraction (`Template::put_seq_csum_at`).

/// The transport checksum of a frame whose sum, reduced modulo 0xffff,
/// is `folded` (below 0xffff). The sum is never zero (the pseudo-header's
/// protocol and length are in it): a residue of 0 is the folded sum
/// 0xffff, whose complement is 0, sent by UDP as all ones; any other
/// residue is the folded sum itself.
#[inline(always)]
pub fn csum_of_folded<const TCP: bool>(folded: u16) -> u16 {
    if folded == 0 {
        if TCP { 0 } else { 0xffff }
    } else {
        !folded
    }
}

/// The residue [`csum_of_folded`] wrote `c` for.
#[inline(always)]
pub fn folded_of_csum<const TCP: bool>(c: u16) -> u16 {
    if c == if TCP { 0 } else { 0xffff } {
        0
    } else {
        !c
    }
}

/// The checksum of the next frame of a run, whose sum is one more (its
/// sequence one more): `csum_of_folded((folded + 1) % 0xffff)` from
/// `csum_of_folded(folded)`, in a compare and a subtraction.
#[inline(always)]
pub fn next_csum<const TCP: bool>(c: u16) -> u16 {
    // The complement falls by one as the residue rises, but for the
    // residue 0's spelling: UDP's 0xffff follows 1, TCP's 0 goes to 0xfffe.
    if TCP {
        if c == 0 { 0xfffe } else { c - 1 }
    } else if c == 1 {
        0xffff
    } else {
        c - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every residue: the checksum moved by `next_csum` is the next
    /// residue's, and `folded_of_csum` gives the residue back (UDP and TCP).
    #[test]
    fn the_checksum_of_the_next_frame_follows_the_residue() {
        fn check<const TCP: bool>() {
            for f in 0..0xffffu16 {
                let c = csum_of_folded::<TCP>(f);
                let next = ((u32::from(f) + 1) % 0xffff) as u16;
                assert_eq!(
                    next_csum::<TCP>(c),
                    csum_of_folded::<TCP>(next),
                    "TCP {TCP}, {f}"
                );
                assert_eq!(folded_of_csum::<TCP>(c), f, "TCP {TCP}, {f}");
            }
        }
        check::<false>();
        check::<true>();
        assert_eq!(csum_of_folded::<false>(0), 0xffff);
        assert_eq!(csum_of_folded::<true>(0), 0);
    }
}
