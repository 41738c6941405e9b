//! Message assembly for the PRINTF service: one table per hostcall buffer,
//! one open message per (buffer, message id), each owned by the lane that
//! began it.
//!
//! The table is plain data (no locking, no I/O); `PrintfService` keeps one
//! per buffer behind its lock and does the formatting after the lock is
//! released.
//!
//! Memory stays bounded whatever the device sends:
//! * a message holds at most `Limits::max_message_words` data words; the
//!   packet that would grow it past that fails the message;
//! * a buffer holds at most `Limits::max_open_messages` open messages and
//!   `Limits::max_buffer_words` data words in all. When a new message or a
//!   new word would pass either cap, the least recently used open messages
//!   of that buffer are evicted (a wave that sent BEGIN and never returned
//!   holds its message until it is the oldest one, then loses it).
//!
//! Ids: a BEGIN gets the most recently freed id, else a fresh one counted
//! up from 1. An id is freed when its message ends (END) or fails, i.e. when
//! the device no longer holds it. An evicted message's id is retired, never
//! handed out again, because its wave may still be alive and come back with
//! it: a continuation with a retired id is then "unknown", not appended to
//! someone else's message.

use std::collections::{BTreeMap, HashMap};

/// Descriptor bit 0: the packet opens a new message.
pub const DESC_BEGIN: u64 = 1 << 0;
/// Descriptor bit 1: the packet ends the message (format and print it).
pub const DESC_END: u64 = 1 << 1;
/// Descriptor bits 5..7: number of data words in slot[1..8].
pub const DESC_LEN_SHIFT: u32 = 5;
pub const DESC_LEN_MASK: u64 = 0x7;
/// Descriptor bits 8..63: the message id.
pub const DESC_ID_SHIFT: u32 = 8;
pub const DESC_ID_MASK: u64 = (1 << 56) - 1;

/// An id the host never hands out. When a packet that is not the last one
/// fails, the reply descriptor carries this id (BEGIN and END clear); the
/// device keeps sending the rest of its message with it, every such packet
/// is answered the same way, and its END packet gets -1.
pub const POISON_ID: u64 = DESC_ID_MASK;
/// The reply descriptor for a failed non-END packet.
pub const POISON_DESCRIPTOR: u64 = POISON_ID << DESC_ID_SHIFT;

/// The fields of a packet descriptor (slot[0]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptor {
    pub begin: bool,
    pub end: bool,
    pub len: usize,
    pub id: u64,
}

impl Descriptor {
    pub fn decode(word: u64) -> Descriptor {
        Descriptor {
            begin: word & DESC_BEGIN != 0,
            end: word & DESC_END != 0,
            len: ((word >> DESC_LEN_SHIFT) & DESC_LEN_MASK) as usize,
            id: (word >> DESC_ID_SHIFT) & DESC_ID_MASK,
        }
    }

    /// The descriptor the host returns after a non-END packet: the device's
    /// own descriptor with BEGIN cleared and `id` in the id field (the device
    /// rewrites LEN and sets END itself for its next packet).
    pub fn reply(word: u64, id: u64) -> u64 {
        let kept = word & !DESC_BEGIN & !(DESC_ID_MASK << DESC_ID_SHIFT);
        kept | ((id & DESC_ID_MASK) << DESC_ID_SHIFT)
    }
}

/// Memory caps for message assembly (per hostcall buffer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Data words one message may hold (control word, format, arguments).
    pub max_message_words: usize,
    /// Messages open at once in one buffer.
    pub max_open_messages: usize,
    /// Data words held by all open messages of one buffer.
    pub max_buffer_words: usize,
    /// Bytes one formatted message may produce.
    pub max_output_bytes: usize,
}

impl Limits {
    /// 64 KiB per message, 65536 open messages and 32 MiB of words per
    /// buffer, 1 MiB of output per message.
    pub const DEFAULT: Limits = Limits {
        max_message_words: 8 * 1024,
        max_open_messages: 64 * 1024,
        max_buffer_words: 4 * 1024 * 1024,
        max_output_bytes: 1024 * 1024,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// Why a packet was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AssemblyError {
    /// A continuation (no BEGIN) names an id with no open message in this
    /// buffer (never handed out, already ended, failed or evicted).
    UnknownId,
    /// The id is open, but was begun by another lane.
    WrongLane,
    /// The message would grow past `max_message_words` (or past the buffer's
    /// budget with nothing left to evict); it is dropped.
    TooLong,
    /// No id left (only after 2^56 evictions).
    NoIdLeft,
}

/// What the caller does with a packet that was accepted.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// The message continues: reply with `Descriptor::reply(desc, id)`.
    Continue { id: u64 },
    /// END: the whole message (data words in order), to format and print.
    Complete(Vec<u64>),
}

#[derive(Debug)]
struct Message {
    lane: u32,
    words: Vec<u64>,
    /// Last-use stamp; key of this message in `MessageTable::lru`.
    stamp: u64,
}

/// The open messages of one hostcall buffer.
#[derive(Debug)]
pub struct MessageTable {
    limits: Limits,
    open: HashMap<u64, Message>,
    /// stamp → id, oldest first (eviction order).
    lru: BTreeMap<u64, u64>,
    free_ids: Vec<u64>,
    next_id: u64,
    next_stamp: u64,
    /// Sum of `words.len()` over `open`.
    held_words: usize,
    evicted: u64,
}

impl MessageTable {
    pub fn new(limits: Limits) -> MessageTable {
        MessageTable {
            limits,
            open: HashMap::new(),
            lru: BTreeMap::new(),
            free_ids: Vec::new(),
            next_id: 1,
            next_stamp: 0,
            held_words: 0,
            evicted: 0,
        }
    }

    pub fn open_messages(&self) -> usize {
        self.open.len()
    }

    pub fn held_words(&self) -> usize {
        self.held_words
    }

    /// Messages evicted so far (caps reached).
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Handles one lane's packet. `data` is slot[1..1+LEN] (at most 7 words).
    /// BEGIN|END in one packet completes at once without taking an id.
    pub fn packet(&mut self, lane: u32, desc: Descriptor, data: &[u64]) -> Result<Step, AssemblyError> {
        if desc.begin {
            if desc.end {
                if data.len() > self.limits.max_message_words {
                    return Err(AssemblyError::TooLong);
                }
                return Ok(Step::Complete(data.to_vec()));
            }
            return self.begin(lane, data);
        }
        self.continue_message(lane, desc, data)
    }

    fn begin(&mut self, lane: u32, data: &[u64]) -> Result<Step, AssemblyError> {
        if data.len() > self.limits.max_message_words || data.len() > self.limits.max_buffer_words {
            return Err(AssemblyError::TooLong);
        }
        while self.open.len() >= self.limits.max_open_messages.max(1)
            || self.held_words + data.len() > self.limits.max_buffer_words
        {
            if !self.evict_oldest(None) {
                break;
            }
        }
        let id = self.alloc_id().ok_or(AssemblyError::NoIdLeft)?;
        let stamp = self.stamp();
        self.lru.insert(stamp, id);
        self.held_words += data.len();
        self.open.insert(id, Message { lane, words: data.to_vec(), stamp });
        Ok(Step::Continue { id })
    }

    fn continue_message(&mut self, lane: u32, desc: Descriptor, data: &[u64]) -> Result<Step, AssemblyError> {
        let id = desc.id;
        let (owner, len) = match self.open.get(&id) {
            Some(message) => (message.lane, message.words.len()),
            None => return Err(AssemblyError::UnknownId),
        };
        if owner != lane {
            return Err(AssemblyError::WrongLane);
        }
        if len + data.len() > self.limits.max_message_words {
            self.remove(id);
            return Err(AssemblyError::TooLong);
        }
        while self.held_words + data.len() > self.limits.max_buffer_words {
            if !self.evict_oldest(Some(id)) {
                self.remove(id);
                return Err(AssemblyError::TooLong);
            }
        }
        let stamp = self.stamp();
        let Some(message) = self.open.get_mut(&id) else {
            return Err(AssemblyError::UnknownId);
        };
        self.lru.remove(&message.stamp);
        message.stamp = stamp;
        message.words.extend_from_slice(data);
        self.held_words += data.len();
        if desc.end {
            let words = self.remove(id).unwrap_or_default();
            return Ok(Step::Complete(words));
        }
        self.lru.insert(stamp, id);
        Ok(Step::Continue { id })
    }

    /// Removes a message that ended or failed; its id becomes reusable.
    fn remove(&mut self, id: u64) -> Option<Vec<u64>> {
        let message = self.open.remove(&id)?;
        self.lru.remove(&message.stamp);
        self.held_words -= message.words.len();
        self.free_ids.push(id);
        Some(message.words)
    }

    /// Evicts the least recently used message other than `keep`; its id is
    /// retired. Returns false if there was nothing to evict.
    fn evict_oldest(&mut self, keep: Option<u64>) -> bool {
        let victim = self.lru.iter().map(|(_, &id)| id).find(|&id| Some(id) != keep);
        let Some(id) = victim else {
            return false;
        };
        if let Some(message) = self.open.remove(&id) {
            self.lru.remove(&message.stamp);
            self.held_words -= message.words.len();
        }
        self.evicted += 1;
        true
    }

    fn alloc_id(&mut self) -> Option<u64> {
        if let Some(id) = self.free_ids.pop() {
            return Some(id);
        }
        if self.next_id >= POISON_ID {
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        Some(id)
    }

    fn stamp(&mut self) -> u64 {
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        stamp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(begin: bool, end: bool, len: usize, id: u64) -> Descriptor {
        Descriptor { begin, end, len, id }
    }

    fn small() -> Limits {
        Limits { max_message_words: 10, max_open_messages: 3, max_buffer_words: 20, max_output_bytes: 1024 }
    }

    fn begin(table: &mut MessageTable, lane: u32, data: &[u64]) -> u64 {
        match table.packet(lane, desc(true, false, data.len(), 0), data) {
            Ok(Step::Continue { id }) => id,
            other => panic!("begin failed: {other:?}"),
        }
    }

    #[test]
    fn descriptor_fields() {
        let word = DESC_BEGIN | (5 << DESC_LEN_SHIFT) | (0x1234 << DESC_ID_SHIFT);
        assert_eq!(Descriptor::decode(word), desc(true, false, 5, 0x1234));
        let word = DESC_END | (7 << DESC_LEN_SHIFT) | (DESC_ID_MASK << DESC_ID_SHIFT);
        assert_eq!(Descriptor::decode(word), desc(false, true, 7, DESC_ID_MASK));
        // The reply clears BEGIN, keeps LEN and reserved bits, replaces the id.
        let word = DESC_BEGIN | 0b11100 | (3 << DESC_LEN_SHIFT) | (9 << DESC_ID_SHIFT);
        let reply = Descriptor::reply(word, 42);
        assert_eq!(reply, 0b11100 | (3 << DESC_LEN_SHIFT) | (42 << DESC_ID_SHIFT));
        assert_eq!(Descriptor::decode(POISON_DESCRIPTOR), desc(false, false, 0, POISON_ID));
    }

    #[test]
    fn multi_packet_message() {
        let mut t = MessageTable::new(Limits::DEFAULT);
        let id = begin(&mut t, 3, &[0]);
        assert_eq!(id, 1);
        assert_eq!(t.packet(3, desc(false, false, 2, id), &[10, 11]), Ok(Step::Continue { id }));
        assert_eq!(t.held_words(), 3);
        assert_eq!(t.packet(3, desc(false, true, 1, id), &[12]), Ok(Step::Complete(vec![0, 10, 11, 12])));
        assert_eq!(t.open_messages(), 0);
        assert_eq!(t.held_words(), 0);
    }

    #[test]
    fn begin_and_end_in_one_packet() {
        let mut t = MessageTable::new(Limits::DEFAULT);
        assert_eq!(t.packet(0, desc(true, true, 2, 77), &[0, 5]), Ok(Step::Complete(vec![0, 5])));
        assert_eq!(t.open_messages(), 0);
    }

    #[test]
    fn interleaved_lanes_and_messages() {
        let mut t = MessageTable::new(Limits::DEFAULT);
        let a = begin(&mut t, 0, &[0]);
        let b = begin(&mut t, 1, &[1]);
        let c = begin(&mut t, 0, &[2]); // same lane, another wave
        assert_eq!(vec![a, b, c], vec![1, 2, 3]);
        t.packet(1, desc(false, false, 1, b), &[21]).unwrap();
        t.packet(0, desc(false, false, 1, c), &[31]).unwrap();
        t.packet(0, desc(false, false, 1, a), &[11]).unwrap();
        assert_eq!(t.packet(0, desc(false, true, 1, c), &[32]), Ok(Step::Complete(vec![2, 31, 32])));
        assert_eq!(t.packet(1, desc(false, true, 0, b), &[]), Ok(Step::Complete(vec![1, 21])));
        assert_eq!(t.packet(0, desc(false, true, 1, a), &[12]), Ok(Step::Complete(vec![0, 11, 12])));
    }

    #[test]
    fn ids_reused_after_end() {
        let mut t = MessageTable::new(Limits::DEFAULT);
        let a = begin(&mut t, 0, &[0]);
        let b = begin(&mut t, 1, &[0]);
        t.packet(0, desc(false, true, 0, a), &[]).unwrap();
        assert_eq!(begin(&mut t, 2, &[0]), a);
        assert_eq!(begin(&mut t, 2, &[0]), b + 1);
    }

    #[test]
    fn unknown_and_foreign_ids() {
        let mut t = MessageTable::new(Limits::DEFAULT);
        assert_eq!(t.packet(0, desc(false, false, 1, 5), &[1]), Err(AssemblyError::UnknownId));
        assert_eq!(t.packet(0, desc(false, true, 1, 5), &[1]), Err(AssemblyError::UnknownId));
        assert_eq!(t.packet(0, desc(false, true, 0, POISON_ID), &[]), Err(AssemblyError::UnknownId));
        let a = begin(&mut t, 4, &[0]);
        assert_eq!(t.packet(5, desc(false, false, 1, a), &[1]), Err(AssemblyError::WrongLane));
        assert_eq!(t.packet(5, desc(false, true, 1, a), &[1]), Err(AssemblyError::WrongLane));
        // The owner's message is untouched.
        assert_eq!(t.packet(4, desc(false, true, 1, a), &[9]), Ok(Step::Complete(vec![0, 9])));
        // Ended: now unknown.
        assert_eq!(t.packet(4, desc(false, true, 1, a), &[9]), Err(AssemblyError::UnknownId));
    }

    #[test]
    fn message_cap_fails_message_and_frees_id() {
        let mut t = MessageTable::new(small());
        let a = begin(&mut t, 0, &[0; 7]);
        assert_eq!(t.packet(0, desc(false, false, 3, a), &[0; 3]), Ok(Step::Continue { id: a }));
        assert_eq!(t.packet(0, desc(false, false, 1, a), &[0]), Err(AssemblyError::TooLong));
        assert_eq!(t.open_messages(), 0);
        assert_eq!(t.held_words(), 0);
        assert_eq!(t.packet(0, desc(false, true, 1, a), &[0]), Err(AssemblyError::UnknownId));
        assert_eq!(begin(&mut t, 0, &[0]), a);
    }

    #[test]
    fn open_message_cap_evicts_oldest_and_retires_its_id() {
        let mut t = MessageTable::new(small());
        let a = begin(&mut t, 0, &[0]);
        let b = begin(&mut t, 1, &[0]);
        let c = begin(&mut t, 2, &[0]);
        // Touch `a` so `b` is the least recently used.
        t.packet(0, desc(false, false, 1, a), &[1]).unwrap();
        let d = begin(&mut t, 3, &[0]);
        assert_eq!(t.open_messages(), 3);
        assert_eq!(t.evicted(), 1);
        assert_ne!(d, b, "an evicted id is never handed out again");
        assert_eq!(t.packet(1, desc(false, true, 0, b), &[]), Err(AssemblyError::UnknownId));
        assert_eq!(t.packet(0, desc(false, true, 0, a), &[]), Ok(Step::Complete(vec![0, 1])));
        assert_eq!(t.packet(2, desc(false, true, 0, c), &[]), Ok(Step::Complete(vec![0])));
        assert_eq!(t.packet(3, desc(false, true, 0, d), &[]), Ok(Step::Complete(vec![0])));
    }

    #[test]
    fn abandoned_begins_stay_bounded() {
        let mut t = MessageTable::new(small());
        for i in 0..10_000u32 {
            begin(&mut t, i % 64, &[0; 5]);
            assert!(t.open_messages() <= 3);
            assert!(t.held_words() <= 20);
        }
        assert!(t.evicted() >= 9_997);
    }

    #[test]
    fn buffer_word_cap_evicts_others_not_the_growing_message() {
        let mut t = MessageTable::new(small());
        let a = begin(&mut t, 0, &[0; 7]);
        let b = begin(&mut t, 1, &[0; 7]);
        let c = begin(&mut t, 2, &[0; 5]);
        assert_eq!(t.held_words(), 19);
        // a (the least recently used) grows by 3 → 22 > 20: b goes, not a.
        assert_eq!(t.packet(0, desc(false, false, 3, a), &[0; 3]), Ok(Step::Continue { id: a }));
        assert_eq!(t.held_words(), 15);
        assert_eq!(t.packet(1, desc(false, true, 0, b), &[]), Err(AssemblyError::UnknownId));
        // A new 7-word message needs 22 > 20: the oldest (c) goes.
        let d = begin(&mut t, 3, &[0; 7]);
        assert_eq!(t.packet(2, desc(false, true, 0, c), &[]), Err(AssemblyError::UnknownId));
        assert_eq!(t.held_words(), 17);
        assert_eq!(t.packet(0, desc(false, true, 0, a), &[]), Ok(Step::Complete(vec![0; 10])));
        assert_eq!(t.packet(3, desc(false, true, 0, d), &[]), Ok(Step::Complete(vec![0; 7])));
        assert_eq!(t.held_words(), 0);
    }
}
