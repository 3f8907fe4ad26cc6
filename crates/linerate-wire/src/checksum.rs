//! The Internet checksum (RFC 1071), with the incremental update of RFC 1624
//! so that a packet template can be patched per packet without summing it
//! again.

use core::net::{Ipv4Addr, Ipv6Addr};

/// Adds `data` as big-endian 16-bit words to a running 32-bit sum (not folded).
/// An odd trailing byte is padded with zero, as RFC 1071 says.
pub fn sum(data: &[u8], mut acc: u32) -> u32 {
    let mut chunks = data.chunks_exact(2);
    // Add in 64-bit to defer folding; fold once at the end.
    let mut wide: u64 = u64::from(acc);
    for c in &mut chunks {
        wide += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        wide += u64::from(u16::from_be_bytes([*last, 0]));
    }
    while wide >> 32 != 0 {
        wide = (wide & 0xffff_ffff) + (wide >> 32);
    }
    acc = wide as u32;
    acc
}

/// Folds a running sum to 16 bits (end-around carry). Two rounds always
/// suffice for 32 bits: the first leaves at most 0x1fffe, the second at
/// most 0xffff.
#[inline]
pub fn fold(acc: u32) -> u16 {
    let acc = (acc & 0xffff) + (acc >> 16);
    let acc = (acc & 0xffff) + (acc >> 16);
    acc as u16
}

/// The checksum field value for `data` alone: the complement of the folded sum.
pub fn checksum(data: &[u8]) -> u16 {
    !fold(sum(data, 0))
}

/// Sum of the IPv4 pseudo-header for UDP/TCP.
pub fn pseudo_v4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, l4_len: u16) -> u32 {
    let mut acc = sum(&src.octets(), 0);
    acc = sum(&dst.octets(), acc);
    acc + u32::from(proto) + u32::from(l4_len)
}

/// Sum of the IPv6 pseudo-header for UDP/TCP/ICMPv6.
pub fn pseudo_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, l4_len: u32) -> u32 {
    let mut acc = sum(&src.octets(), 0);
    acc = sum(&dst.octets(), acc);
    acc = sum(&l4_len.to_be_bytes(), acc);
    acc + u32::from(next_header)
}

/// RFC 1624 equation 3: the new checksum after 16-bit-aligned data whose sum
/// was `old_sum` became data whose sum is `new_sum`:
/// `HC' = ~(~HC + ~m + m')`.
///
/// Both sums must cover the same byte positions, starting at an even offset
/// from the start of the checksummed data (or both at an odd one).
#[inline]
pub fn update(checksum: u16, old_sum: u32, new_sum: u32) -> u16 {
    update_from(update_base(checksum, old_sum), new_sum)
}

/// The part of [`update`] that depends only on the old checksum and sum:
/// a template computes it once, each packet then calls [`update_from`].
#[inline]
pub fn update_base(checksum: u16, old_sum: u32) -> u32 {
    u32::from(!checksum) + u32::from(!fold(old_sum))
}

/// [`update`] from [`update_base`]'s value.
#[inline]
pub fn update_from(base: u32, new_sum: u32) -> u16 {
    !fold(base + u32::from(fold(new_sum)))
}

/// Updates a checksum for one 16-bit word changing from `old` to `new`.
pub fn update_word(checksum: u16, old: u16, new: u16) -> u16 {
    update(checksum, u32::from(old), u32::from(new))
}

/// UDP sends a computed checksum of zero as all ones (RFC 768).
pub fn udp_nonzero(c: u16) -> u16 {
    if c == 0 { 0xffff } else { c }
}

#[cfg(test)]
mod tests {

    #[test]
    fn fold_is_the_end_around_carry_for_every_width() {
        let slow = |mut a: u32| {
            while a >> 16 != 0 {
                a = (a & 0xffff) + (a >> 16);
            }
            a as u16
        };
        for a in [
            0,
            1,
            0xffff,
            0x1_0000,
            0x1fffe,
            0xffff_ffff,
            0xfffe_0001,
            0x8000_8000,
        ] {
            assert_eq!(fold(a), slow(a), "{a:#x}");
        }
        let mut x = 0x9e37_79b9u32;
        for _ in 0..10_000 {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            assert_eq!(fold(x), slow(x), "{x:#x}");
        }
    }

    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&data, 0)), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(fold(sum(&[0x12, 0x34, 0x56], 0)), 0x1234 + 0x5600);
    }

    #[test]
    fn data_with_its_checksum_sums_to_all_ones() {
        let mut data = [
            0x45u8, 0, 0, 0x54, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2,
        ];
        let c = checksum(&data);
        data[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(fold(sum(&data, 0)), 0xffff);
        assert_eq!(checksum(&data), 0);
    }

    #[test]
    fn incremental_equals_full() {
        let mut data = [0u8; 40];
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37).wrapping_add(11);
        }
        let mut csum = checksum(&data);
        for seq in [0u64, 1, 0xffff, 0xdead_beef_0000_0001, u64::MAX, 7] {
            let old = sum(&data[8..16], 0);
            data[8..16].copy_from_slice(&seq.to_be_bytes());
            csum = update(csum, old, sum(&data[8..16], 0));
            // Equal as one's-complement numbers: the data verifies.
            assert_eq!(fold(sum(&data, u32::from(csum))), 0xffff, "seq {seq:#x}");
        }
    }

    #[test]
    fn update_word_matches() {
        let mut data = [0xabu8, 0xcd, 0x00, 0x00, 0x12, 0x34];
        let c0 = checksum(&data);
        data[2..4].copy_from_slice(&0xffffu16.to_be_bytes());
        assert_eq!(update_word(c0, 0, 0xffff), checksum(&data));
    }
}
