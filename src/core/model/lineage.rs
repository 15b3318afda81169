//! The handoff chain as the state holds it: appended to at every recorded check-in and
//! copied with the state at every change of it, so a copy must not cost the chain's
//! length. Records are kept in sealed chunks shared by every copy, and the last few
//! in a short open one: copying the chain copies a pointer per sealed chunk and the open
//! chunk's records (before, a check-in copied every record, which grew with the task's age).

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::state::LineageEntry;

/// Records per sealed chunk.
const CHUNK: usize = 16;

/// The handoff chain, in processing order.
#[derive(Debug, Clone, Default)]
pub struct Lineage {
    /// Full chunks of [`CHUNK`] records (or as read), never changed once sealed.
    sealed: Vec<Arc<Vec<LineageEntry>>>,
    /// Records appended since the last chunk was sealed.
    open: Vec<LineageEntry>,
}

impl Lineage {
    /// How many records.
    pub fn len(&self) -> usize {
        self.sealed.iter().map(|c| c.len()).sum::<usize>() + self.open.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty() && self.sealed.iter().all(|c| c.is_empty())
    }

    /// Every record, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &LineageEntry> {
        self.sealed.iter().flat_map(|c| c.iter()).chain(self.open.iter())
    }

    /// The first record.
    pub fn first(&self) -> Option<&LineageEntry> {
        self.iter().next()
    }

    /// The newest record.
    pub fn last(&self) -> Option<&LineageEntry> {
        self.open
            .last()
            .or_else(|| self.sealed.iter().rev().find_map(|c| c.last()))
    }

    /// Append a record.
    pub fn push(&mut self, e: LineageEntry) {
        if self.open.len() >= CHUNK {
            self.sealed.push(Arc::new(std::mem::take(&mut self.open)));
        }
        self.open.push(e);
    }

    /// The `i`th record (from 0).
    pub fn get(&self, mut i: usize) -> Option<&LineageEntry> {
        for c in self.sealed.iter().map(|c| c.as_slice()).chain([self.open.as_slice()]) {
            if i < c.len() {
                return c.get(i);
            }
            i -= c.len();
        }
        None
    }

    /// The records from the `from`th on.
    pub fn since(&self, from: usize) -> impl Iterator<Item = &LineageEntry> {
        self.iter().skip(from)
    }

    /// Every record, as one list (for the few readers that want a slice).
    pub fn to_vec(&self) -> Vec<LineageEntry> {
        self.iter().cloned().collect()
    }
}

impl From<Vec<LineageEntry>> for Lineage {
    fn from(v: Vec<LineageEntry>) -> Lineage {
        let mut l = Lineage::default();
        for e in v {
            l.push(e);
        }
        l
    }
}

impl PartialEq for Lineage {
    fn eq(&self, other: &Lineage) -> bool {
        let same_chunks = self.sealed.len() == other.sealed.len()
            && self.sealed.iter().zip(&other.sealed).all(|(a, b)| Arc::ptr_eq(a, b));
        if same_chunks {
            return self.open == other.open;
        }
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Lineage {}

impl Serialize for Lineage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Lineage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Lineage, D::Error> {
        Ok(Vec::<LineageEntry>::deserialize(d)?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::handoff::Status;

    fn entry(i: usize) -> LineageEntry {
        LineageEntry {
            file: format!("dev-{i}.md"),
            from: "dev".into(),
            target: None,
            recommended_next: None,
            status: Status::Complete,
            time: chrono::DateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn a_copy_shares_the_sealed_records_and_both_grow_apart() {
        let mut a = Lineage::default();
        assert!(a.is_empty() && a.last().is_none());
        for i in 0..40 {
            a.push(entry(i));
        }
        let mut b = a.clone();
        assert_eq!(a, b);
        assert!(
            Arc::ptr_eq(&a.sealed[0], &b.sealed[0]),
            "sealed chunks are shared, not copied"
        );
        b.push(entry(40));
        assert_ne!(a, b);
        assert_eq!((a.len(), b.len()), (40, 41));
        assert_eq!(b.last().unwrap().file, "dev-40.md");
        assert_eq!(a.first().unwrap().file, "dev-0.md");
        let files: Vec<&str> = b.since(38).map(|e| e.file.as_str()).collect();
        assert_eq!(files, ["dev-38.md", "dev-39.md", "dev-40.md"]);
        assert_eq!(b.get(17).unwrap().file, "dev-17.md");
        assert_eq!(b.get(40).unwrap().file, "dev-40.md");
        assert!(b.get(41).is_none());
        // The same records, chunked otherwise (read back from JSON), are equal.
        let json = serde_json::to_string(&b).unwrap();
        let back: Lineage = serde_json::from_str(&json).unwrap();
        assert_eq!(back, b);
        assert_eq!(back.to_vec(), b.to_vec());
        assert_eq!(serde_json::to_string(&back).unwrap(), json);
    }
}
