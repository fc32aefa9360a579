//! Record inputs: JSON Lines source records and BEIR `corpus.jsonl`, one source per line,
//! with a problem naming `file:line` for each line that cannot be used.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::BufRead;
use std::path::Path;

use finder_core::{Envelope, IndexSettings};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::{clip_title, derive_summary, fragment};
use crate::document::{Problem, SourceDoc};

/// Which field names a record file uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Finder records: `id`, `title`, `text`, `date`, `tags`, `summary`, `extras`.
    Records,
    /// BEIR corpus: `_id`, `title`, `text`, `metadata` (its scalars become extras).
    Beir,
}

impl Layout {
    fn id_key(self) -> &'static str {
        match self {
            Layout::Records => "id",
            Layout::Beir => "_id",
        }
    }
}

/// Reads the record file at `path`. Only a file that cannot be opened is an error; every bad
/// line is a problem sent to `sink`, and the lines after it are still read.
pub(super) fn read_records(
    path: &Path,
    layout: Layout,
    origin: &str,
    settings: &IndexSettings,
    sink: &mut dyn FnMut(Result<SourceDoc, Problem>),
) -> Result<(), Problem> {
    let file = std::fs::File::open(path).map_err(|e| Problem {
        place: path.display().to_string(),
        reason: format!("cannot read file: {e}"),
        source_id: None,
    })?;
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    read_lines(
        std::io::BufReader::new(file),
        &name,
        layout,
        origin,
        settings,
        sink,
    );
    Ok(())
}

/// Reads records line by line from `reader`; `name` is the file name used in problem places.
pub(crate) fn read_lines(
    mut reader: impl BufRead,
    name: &str,
    layout: Layout,
    origin: &str,
    settings: &IndexSettings,
    sink: &mut dyn FnMut(Result<SourceDoc, Problem>),
) {
    let mut first_seen: HashMap<String, usize> = HashMap::new();
    let mut buf = Vec::new();
    let mut line_no = 0usize;
    let mut offset = 0usize;
    loop {
        buf.clear();
        let read = match reader.read_until(b'\n', &mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) => {
                let place = format!("{name}:{}", line_no + 1);
                sink(Err(Problem {
                    place,
                    reason: format!("cannot read file: {e}"),
                    source_id: None,
                }));
                return;
            }
        };
        line_no += 1;
        let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let mut line_start = offset;
        offset += read;
        // Windows tools often start a UTF-8 file with a byte-order mark.
        let line = match line.strip_prefix(BOM) {
            Some(rest) if line_no == 1 => {
                line_start += BOM.len();
                rest
            }
            _ => line,
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let place = format!("{name}:{line_no}");
        let record = match parse_line(line, line_start, layout) {
            Ok(record) => record,
            Err(Invalid { reason, id }) => {
                sink(Err(Problem {
                    place,
                    reason,
                    source_id: id,
                }));
                continue;
            }
        };
        if let Some(first) = first_seen.get(&record.id) {
            let reason = format!("duplicate id {} (first at line {first})", record.id);
            sink(Err(Problem {
                place,
                reason,
                source_id: Some(record.id),
            }));
            continue;
        }
        first_seen.insert(record.id.clone(), line_no);
        // The line's bytes, without its line ending, are everything that shapes the source.
        let hash = blake3::hash(line).to_hex().to_string();
        sink(Ok(record.into_source(origin, hash, settings)));
    }
}

const BOM: &[u8] = b"\xef\xbb\xbf";

/// Longest id, in bytes. The id is the source's delete and lookup key, one raw term in the
/// index, and the index drops terms past 65,530 bytes: a source with a longer id could never
/// be replaced or removed.
pub(crate) const MAX_ID_BYTES: usize = 4_096;

/// One usable record.
struct Record {
    id: String,
    title: String,
    text: String,
    date: Option<String>,
    tags: Vec<String>,
    summary: Option<String>,
    extras: BTreeMap<String, String>,
    vector: Option<Vec<f32>>,
    entity: bool,
    aliases: Vec<String>,
    relations: Vec<(String, String)>,
}

impl Record {
    fn into_source(self, origin: &str, hash: String, settings: &IndexSettings) -> SourceDoc {
        let summary = self
            .summary
            .unwrap_or_else(|| derive_summary(&self.text, settings.summary_max_chars));
        SourceDoc {
            origin: origin.to_string(),
            envelope: Envelope {
                title: clip_title(self.title),
                path: self.id.clone(),
                date: self.date,
                tags: self.tags,
                extras: self.extras,
            },
            summary,
            hash,
            // Record extents are relative to the record's text: there is no file to slice.
            fragments: fragment(&self.text, 0, 1, settings.fragment_max_chars),
            vector: self.vector,
            entity: self.entity,
            aliases: self.aliases,
            relations: self.relations,
            id: self.id,
        }
    }
}

/// Why a line is unusable, and its id when that much could be read.
struct Invalid {
    reason: String,
    id: Option<String>,
}

impl Invalid {
    fn new(reason: impl Into<String>) -> Invalid {
        Invalid {
            reason: reason.into(),
            id: None,
        }
    }
}

fn parse_line(line: &[u8], line_start: usize, layout: Layout) -> Result<Record, Invalid> {
    let text = std::str::from_utf8(line).map_err(|e| {
        Invalid::new(format!(
            "not valid UTF-8 (byte offset {})",
            line_start + e.valid_up_to()
        ))
    })?;
    let whole = || serde_json::from_str::<Line>(text);
    let line = match lift_vector(text) {
        Lift::Lifted(rest, floats) => match serde_json::from_str::<Line>(&rest) {
            Ok(Line::Object {
                object,
                vector: Vector::Absent,
            }) => Ok(Line::Object {
                object,
                vector: Vector::Floats(floats),
            }),
            // serde's verdict and column are those of the line as it was.
            _ => whole(),
        },
        Lift::Absent | Lift::Serde => whole(),
    };
    let line: Line = line.map_err(|e| {
        let message = e.to_string();
        let message = message
            .split(" at line ")
            .next()
            .unwrap_or(&message)
            .to_string();
        Invalid::new(format!("not valid JSON: {message} (column {})", e.column()))
    })?;
    let Line::Object { object, vector } = line else {
        return Err(Invalid::new("expected a JSON object with `id` and `text`"));
    };
    let id_key = layout.id_key();
    let id = match object.get(id_key) {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(_)) => return Err(Invalid::new(format!("`{id_key}` is empty"))),
        None | Some(Value::Null) => {
            return Err(Invalid::new(format!(
                "missing `{id_key}` (a string or number)"
            )))
        }
        Some(_) => {
            return Err(Invalid::new(format!(
                "`{id_key}` must be a string or number"
            )))
        }
    };
    if id.len() > MAX_ID_BYTES {
        return Err(Invalid::new(format!(
            "`{id_key}` is {} bytes long; at most {MAX_ID_BYTES}",
            id.len()
        )));
    }
    fields(&object, vector, id.clone(), layout).map_err(|reason| Invalid {
        reason,
        id: Some(id),
    })
}

/// The fields after the id; an error says which field was wrong and what it should be.
fn fields(
    object: &Map<String, Value>,
    vector: Vector,
    id: String,
    layout: Layout,
) -> Result<Record, String> {
    let entity = match optional_string(object, "kind")?.as_deref() {
        None | Some("source") => false,
        Some("entity") => true,
        Some(other) => {
            return Err(format!(
                "`kind` is `{other}`; expected `source` (the default) or `entity`"
            ))
        }
    };
    let aliases = string_list(object, "aliases")?;
    let relations = match object.get("relations") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, r)| relation(r).map_err(|why| format!("`relations`, item {}: {why}", i + 1)))
            .collect::<Result<Vec<_>, String>>()?,
        Some(_) => {
            return Err("`relations` must be an array of {\"to\": id, \"kind\": name}".into())
        }
    };
    // An entity is found by its name, aliases and description.
    let text = match (entity, object.get("text")) {
        (_, Some(Value::String(s))) => s.clone(),
        (true, None | Some(Value::Null)) => {
            let mut parts: Vec<String> = optional_string(object, "name")?.into_iter().collect();
            parts.extend(aliases.iter().cloned());
            parts.extend(optional_string(object, "description")?);
            parts.join("\n")
        }
        (false, None | Some(Value::Null)) => {
            return Err("missing `text` (a string, may be empty)".to_string())
        }
        (_, Some(_)) => return Err("`text` must be a string".to_string()),
    };
    let title = optional_string(object, "title")?
        .or(optional_string(object, "name")?)
        .unwrap_or_default();
    let date = match object.get("date") {
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => optional_string(object, "date")?,
    };
    let tags = match object.get("tags") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|t| t.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or("`tags` must be an array of strings")?,
        Some(_) => return Err("`tags` must be an array of strings".to_string()),
    };
    let summary = optional_string(object, "summary")?.filter(|s| !s.trim().is_empty());
    let mut extras = match layout {
        Layout::Records => extras(object.get("extras"))?,
        // BEIR metadata is free-form: keep its scalars, pass over the rest.
        Layout::Beir => match object.get("metadata") {
            Some(Value::Object(map)) => map
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), scalar(v)?)))
                .collect(),
            _ => BTreeMap::new(),
        },
    };
    if let Some(label) = optional_string(object, "label")? {
        extras.insert("label".to_string(), label);
    }
    let vector = match vector {
        Vector::Absent => None,
        Vector::Floats(v) => Some(v),
        Vector::Invalid => {
            return Err("`vector` must be a non-empty array of finite numbers".to_string())
        }
    };
    Ok(Record {
        id,
        title,
        text,
        date,
        tags,
        summary,
        extras,
        vector,
        entity,
        aliases,
        relations,
    })
}

/// A line as parsed: every top-level field as a JSON value but `vector`, whose numbers go
/// straight into floats. Read as a `Value`, a 384-number vector was most of a record's parse:
/// a tree node per number, then a second pass to convert them.
enum Line {
    Object {
        object: Map<String, Value>,
        vector: Vector,
    },
    /// Valid JSON that is not an object.
    Other,
}

/// The `vector` field; [`Vector::Invalid`] is anything but a non-empty array of numbers that
/// are finite as `f32`. The line's other fields are still read, so the problem it makes can
/// name the source.
enum Vector {
    Absent,
    Floats(Vec<f32>),
    Invalid,
}

/// One element of `vector`: a number that is finite as `f32` (converted as `Value::as_f64`
/// then `as f32`), or `None` for anything else.
struct Float(Option<f32>);

/// Visitor methods for the scalars a visitor maps to one fixed result.
macro_rules! scalars_are {
    ($result:expr, $($method:ident($($arg:ty)?)),*) => {
        $(fn $method<E>(self $(, _: $arg)?) -> Result<Self::Value, E> {
            Ok($result)
        })*
    };
}

/// Reads and drops a sequence's elements, or a map's entries, that a visitor has no use for.
/// As `Value`s, not `IgnoredAny`: the skipping parser checks neither number ranges, nor
/// escapes, nor nesting depth, and the line must be as valid JSON as a `Value` needs it.
fn drop_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<Value>()?.is_some() {}
    Ok(())
}

fn drop_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<String, Value>()?.is_some() {}
    Ok(())
}

impl<'de> Deserialize<'de> for Line {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Line, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Line;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Line, A::Error> {
                let mut object = Map::new();
                let mut vector = Vector::Absent;
                // A repeated key keeps its last value, as `Value` does.
                while let Some(key) = map.next_key::<String>()? {
                    if key == "vector" {
                        vector = map.next_value()?;
                    } else {
                        object.insert(key, map.next_value()?);
                    }
                }
                Ok(Line::Object { object, vector })
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Line, A::Error> {
                drop_seq(seq)?;
                Ok(Line::Other)
            }
            scalars_are!(
                Line::Other,
                visit_unit(),
                visit_bool(bool),
                visit_i64(i64),
                visit_u64(u64),
                visit_f64(f64),
                visit_str(&str)
            );
        }
        deserializer.deserialize_any(Visit)
    }
}

impl<'de> Deserialize<'de> for Vector {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Vector, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Vector;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of numbers")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vector, A::Error> {
                let mut floats = Vec::new();
                let mut valid = true;
                while let Some(Float(x)) = seq.next_element()? {
                    match x {
                        Some(x) if valid => floats.push(x),
                        _ => valid = false,
                    }
                }
                Ok(if valid && !floats.is_empty() {
                    Vector::Floats(floats)
                } else {
                    Vector::Invalid
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Vector, A::Error> {
                drop_map(map)?;
                Ok(Vector::Invalid)
            }
            scalars_are!(Vector::Absent, visit_unit());
            scalars_are!(
                Vector::Invalid,
                visit_bool(bool),
                visit_i64(i64),
                visit_u64(u64),
                visit_f64(f64),
                visit_str(&str)
            );
        }
        deserializer.deserialize_any(Visit)
    }
}

impl<'de> Deserialize<'de> for Float {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Float, D::Error> {
        struct Visit;
        fn finite(x: f64) -> Float {
            Float(Some(x as f32).filter(|x| x.is_finite()))
        }
        impl<'de> Visitor<'de> for Visit {
            type Value = Float;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_f64<E>(self, x: f64) -> Result<Float, E> {
                Ok(finite(x))
            }
            fn visit_i64<E>(self, x: i64) -> Result<Float, E> {
                Ok(finite(x as f64))
            }
            fn visit_u64<E>(self, x: u64) -> Result<Float, E> {
                Ok(finite(x as f64))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Float, A::Error> {
                drop_seq(seq)?;
                Ok(Float(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Float, A::Error> {
                drop_map(map)?;
                Ok(Float(None))
            }
            scalars_are!(Float(None), visit_unit(), visit_bool(bool), visit_str(&str));
        }
        deserializer.deserialize_any(Visit)
    }
}

/// A record line's top-level `vector` array, read ahead of serde when it is a plain array of
/// JSON numbers: the rest of the line is then parsed with the array as `null`. A million
/// 384-number vectors were a third of the reading thread's work through serde's number
/// parser and its visitors, one number at a time (docs/perf/given-vectors-read-ahead.md).
enum Lift {
    /// No top-level `vector` key: the line goes to serde as it is.
    Absent,
    /// The line with the array's bytes replaced by `null`, and the array's floats.
    Lifted(String, Vec<f32>),
    /// Anything the direct read does not take (another value, a number outside its exact
    /// range, a repeated key, a key with escapes, bad JSON): serde reads the whole line.
    Serde,
}

/// Finds the top-level `vector` key of the object `text` and reads its array of numbers.
/// The scan follows strings and nesting only; serde still checks everything else.
fn lift_vector(text: &str) -> Lift {
    let b = text.as_bytes();
    let mut i = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    if b.get(i) != Some(&b'{') {
        return Lift::Absent;
    }
    let mut depth = 0usize;
    // At depth 1, right after `{` or `,`: the next string is a key.
    let mut key_next = false;
    let mut found: Option<(usize, usize, Vec<f32>)> = None;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let start = i + 1;
                let Some(end) = string_end(b, start) else {
                    return Lift::Serde;
                };
                i = end + 1;
                if !(depth == 1 && key_next) {
                    continue;
                }
                key_next = false;
                let key = &b[start..end];
                if key.contains(&b'\\') {
                    return Lift::Serde;
                }
                if key != b"vector" {
                    continue;
                }
                if found.is_some() {
                    return Lift::Serde;
                }
                let mut j = skip_space(b, i);
                if b.get(j) != Some(&b':') {
                    return Lift::Serde;
                }
                j = skip_space(b, j + 1);
                if b.get(j) != Some(&b'[') {
                    return Lift::Serde;
                }
                let Some((floats, after)) = number_array(b, j) else {
                    return Lift::Serde;
                };
                found = Some((j, after, floats));
                i = after;
            }
            b'{' | b'[' => {
                depth += 1;
                key_next = depth == 1 && b[i] == b'{';
                i += 1;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                key_next = false;
                i += 1;
            }
            b',' => {
                key_next = depth == 1;
                i += 1;
            }
            _ => i += 1,
        }
    }
    match found {
        None => Lift::Absent,
        Some((start, end, floats)) => {
            let mut rest = String::with_capacity(text.len() - (end - start) + 4);
            rest.push_str(&text[..start]);
            rest.push_str("null");
            rest.push_str(&text[end..]);
            Lift::Lifted(rest, floats)
        }
    }
}

/// The index of the quote that closes the string whose text starts at `from`.
fn string_end(b: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let at = from + memchr::memchr2(b'"', b'\\', &b[from..])?;
        if b[at] == b'"' {
            return Some(at);
        }
        from = at + 2;
        if from > b.len() {
            return None;
        }
    }
}

fn skip_space(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// Reads the array of numbers opening at `b[open]`: its floats (each finite as `f32`, else
/// `None` for the whole array) and the index after its `]`. `None` too for an empty array, or
/// anything but numbers, so that serde reads it and says what is wrong.
fn number_array(b: &[u8], open: usize) -> Option<(Vec<f32>, usize)> {
    // Room for a MiniLM vector at once; longer ones grow.
    let mut floats = Vec::with_capacity(384);
    let mut i = skip_space(b, open + 1);
    loop {
        let (x, after) = json_number(b, i)?;
        let x = x as f32;
        if !x.is_finite() {
            return None;
        }
        floats.push(x);
        i = skip_space(b, after);
        match b.get(i)? {
            b',' => i = skip_space(b, i + 1),
            b']' => return Some((floats, i + 1)),
            _ => return None,
        }
    }
}

/// The eight bytes at `b[i..]` as a decimal number, when all eight are ASCII digits (the first
/// the most significant), read as one little-endian word: a check of every byte at once, then
/// pairs, fours and the eight combined by three multiplications.
fn eight_digits(b: &[u8], i: usize) -> Option<u64> {
    let word = u64::from_le_bytes(b.get(i..i.checked_add(8)?)?.try_into().ok()?);
    const ONES: u64 = 0x0101_0101_0101_0101;
    // A byte below b'0' borrows into its top bit when b'0' is taken away; one above b'9' sets
    // it when 0x46 (0x80 - b'9' - 1) is added. No byte here has its top bit set otherwise.
    let below = word.wrapping_sub(ONES * u64::from(b'0'));
    let above = word.wrapping_add(ONES * 0x46);
    if (below | above) & (ONES * 0x80) != 0 {
        return None;
    }
    // `below` holds the digits' values, the first digit in the lowest byte.
    let pairs = below * 10 + (below >> 8); // bytes 0, 2, 4, 6: two-digit numbers
    const LOW_BYTES: u64 = 0x0000_00FF_0000_00FF;
    // Two products whose upper halves add up to the eight digits' value; what they carry
    // past 64 bits is not part of it.
    let fours = (pairs & LOW_BYTES)
        .wrapping_mul(100 + (1_000_000 << 32))
        .wrapping_add(((pairs >> 16) & LOW_BYTES).wrapping_mul(1 + (10_000 << 32)));
    Some(fours >> 32)
}

/// The powers of ten from 10^0 to 10^308, each the `f64` nearest to it, as serde_json's own
/// table holds them (its literals `1e0` to `1e308`; parsing "1eN" rounds the same way). Up to
/// 10^22 they are exact.
static POWERS_OF_TEN: std::sync::LazyLock<[f64; 309]> = std::sync::LazyLock::new(|| {
    std::array::from_fn(|n| format!("1e{n}").parse().expect("a power of ten parses"))
});

/// The JSON number at `b[i]` and the index after it, when its digits make a `u64` scaled by a
/// power of ten up to 10^308 either way. The value is serde_json's to the bit: it too takes
/// the digits as a `u64`, converts that to `f64` and divides or multiplies it once by the same
/// power from the same table. `None` for anything else (more digits than a `u64` holds, a
/// power past 10^308, which serde reaches in steps), which serde then reads.
fn json_number(b: &[u8], mut i: usize) -> Option<(f64, usize)> {
    let negative = b.get(i) == Some(&b'-');
    i += usize::from(negative);
    // Digits past what a u64 holds are left to serde, whose arithmetic then differs.
    let push = |mantissa: u64, d: u8| mantissa.checked_mul(10)?.checked_add(u64::from(d - b'0'));
    let mut mantissa = 0u64;
    match b.get(i)? {
        b'0' => i += 1,
        b'1'..=b'9' => {
            while let Some(&d @ b'0'..=b'9') = b.get(i) {
                mantissa = push(mantissa, d)?;
                i += 1;
            }
        }
        _ => return None,
    }
    let mut exponent = 0i32;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let first = i;
        // A float's fraction is most of its digits: eight at a time, then one by one.
        while let Some(eight) = eight_digits(b, i) {
            mantissa = mantissa.checked_mul(100_000_000)?.checked_add(eight)?;
            i += 8;
        }
        while let Some(&d @ b'0'..=b'9') = b.get(i) {
            mantissa = push(mantissa, d)?;
            i += 1;
        }
        if i == first {
            return None;
        }
        exponent = -i32::try_from(i - first).ok()?;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        let negative_exponent = b.get(i) == Some(&b'-');
        i += usize::from(matches!(b.get(i), Some(b'+' | b'-')));
        let first = i;
        let mut e = 0i32;
        while let Some(&d @ b'0'..=b'9') = b.get(i) {
            e = e.checked_mul(10)?.checked_add(i32::from(d - b'0'))?;
            i += 1;
        }
        if i == first {
            return None;
        }
        exponent = exponent.checked_add(if negative_exponent { -e } else { e })?;
    }
    let power = *POWERS_OF_TEN.get(exponent.unsigned_abs() as usize)?;
    let x = if exponent < 0 {
        mantissa as f64 / power
    } else {
        mantissa as f64 * power
    };
    Some((if negative { -x } else { x }, i))
}

/// One declared relation: `{"to": id, "kind": name}`; the kind defaults to `relates`.
fn relation(value: &Value) -> Result<(String, String), String> {
    let Value::Object(r) = value else {
        return Err("expected {\"to\": id, \"kind\": name}".to_string());
    };
    let to = match r.get("to") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(_)) => return Err("`to` is empty".to_string()),
        None | Some(Value::Null) => return Err("missing `to` (a source id)".to_string()),
        Some(_) => return Err("`to` must be a string or number".to_string()),
    };
    let kind = match r.get("kind") {
        None | Some(Value::Null) => "relates".to_string(),
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(_) => return Err("`kind` must be a non-empty string".to_string()),
    };
    Ok((to, kind))
}

fn string_list(object: &Map<String, Value>, key: &str) -> Result<Vec<String>, String> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|t| t.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or(format!("`{key}` must be an array of strings")),
        Some(_) => Err(format!("`{key}` must be an array of strings")),
    }
}

fn optional_string(object: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("`{key}` must be a string")),
    }
}

/// `extras`: an object whose values are strings, numbers or booleans (nulls are skipped).
fn extras(value: Option<&Value>) -> Result<BTreeMap<String, String>, String> {
    let map = match value {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map,
        Some(_) => {
            return Err("`extras` must be an object of strings, numbers or booleans".to_string())
        }
    };
    let mut out = BTreeMap::new();
    for (key, value) in map {
        match value {
            Value::Null => {}
            other => {
                let text = scalar(other)
                    .ok_or_else(|| format!("`extras.{key}` must be a string, number or boolean"))?;
                out.insert(key.clone(), text);
            }
        }
    }
    Ok(out)
}

fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy;

    fn read(text: &str, layout: Layout) -> (Vec<SourceDoc>, Vec<Problem>) {
        let mut sources = Vec::new();
        let mut problems = Vec::new();
        let settings = IndexSettings::default();
        read_lines(
            text.as_bytes(),
            "in.jsonl",
            layout,
            "o",
            &settings,
            &mut |item| match item {
                Ok(s) => sources.push(s),
                Err(p) => problems.push(p),
            },
        );
        (sources, problems)
    }

    #[test]
    fn records_become_sources_with_all_fields() {
        let line = r#"{"id": 7, "title": "Token expiry", "text": "AUTH-041 means the refresh token expired.", "date": "2024-01-02", "tags": ["auth"], "extras": {"team": "platform", "sev": 2, "public": false, "none": null}, "other": [1]}"#;
        let (sources, problems) = read(&format!("{line}\n"), Layout::Records);
        assert!(problems.is_empty(), "{problems:?}");
        let s = &sources[0];
        assert_eq!(s.id, "7");
        assert_eq!(s.envelope.path, "7");
        assert_eq!(s.envelope.title, "Token expiry");
        assert_eq!(s.envelope.date.as_deref(), Some("2024-01-02"));
        assert_eq!(s.envelope.tags, vec!["auth"]);
        let extras: Vec<_> = s
            .envelope
            .extras
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            extras,
            vec![("public", "false"), ("sev", "2"), ("team", "platform")]
        );
        assert_eq!(s.summary, "AUTH-041 means the refresh token expired.");
        assert_eq!(s.hash, blake3::hash(line.as_bytes()).to_hex().to_string());
        assert_eq!(s.fragments.len(), 1);
        assert_eq!(s.fragments[0].extent.byte_start, 0);
        assert_eq!(s.fragments[0].extent.line_start, 1);
    }

    #[test]
    fn malformed_line_in_the_middle_is_a_problem_and_the_rest_is_read() {
        let text = "{\"id\": \"a\", \"text\": \"first\"}\n{\"id\": \"b\", \"text\": \n\n{\"id\": \"c\", \"text\": \"third\", \"summary\": \"Given.\"}\r\n";
        let (sources, problems) = read(text, Layout::Records);
        let ids: Vec<_> = sources.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, vec!["a", "c"]);
        assert_eq!(sources[1].summary, "Given.");
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].place, "in.jsonl:2");
        assert!(
            problems[0].reason.starts_with("not valid JSON"),
            "{}",
            problems[0].reason
        );
        assert_eq!(problems[0].source_id, None);
    }

    #[test]
    fn missing_and_mistyped_fields_are_named() {
        let cases = [
            (
                r#"{"text": "x"}"#,
                "missing `id` (a string or number)",
                None,
            ),
            (r#"{"id": "", "text": "x"}"#, "`id` is empty", None),
            (
                r#"{"id": [1], "text": "x"}"#,
                "`id` must be a string or number",
                None,
            ),
            (
                r#"{"id": "k"}"#,
                "missing `text` (a string, may be empty)",
                Some("k"),
            ),
            (
                r#"{"id": "k", "text": 3}"#,
                "`text` must be a string",
                Some("k"),
            ),
            (
                r#"{"id": "k", "text": "", "tags": "a"}"#,
                "`tags` must be an array of strings",
                Some("k"),
            ),
            (
                r#"{"id": "k", "text": "", "tags": ["a", 1]}"#,
                "`tags` must be an array of strings",
                Some("k"),
            ),
            (
                r#"{"id": "k", "text": "", "title": 1}"#,
                "`title` must be a string",
                Some("k"),
            ),
            (
                r#"{"id": "k", "text": "", "extras": {"a": [1]}}"#,
                "`extras.a` must be a string, number or boolean",
                Some("k"),
            ),
            (
                r#"["id", "text"]"#,
                "expected a JSON object with `id` and `text`",
                None,
            ),
        ];
        for (line, reason, id) in cases {
            let (sources, problems) = read(line, Layout::Records);
            assert!(sources.is_empty(), "{line}");
            assert_eq!(problems[0].reason, reason, "{line}");
            assert_eq!(problems[0].source_id.as_deref(), id, "{line}");
            assert_eq!(problems[0].place, "in.jsonl:1");
        }
    }

    #[test]
    fn bad_relations_name_the_item_and_what_is_wrong() {
        let cases = [
            (r#""x""#, "`relations` must be an array"),
            (r#"[1]"#, "`relations`, item 1: expected {\"to\": id"),
            (
                r#"[{"to": "a"}, {"kind": "is"}]"#,
                "`relations`, item 2: missing `to`",
            ),
            (r#"[{"to": " "}]"#, "`relations`, item 1: `to` is empty"),
            (
                r#"[{"to": ["a"]}]"#,
                "`relations`, item 1: `to` must be a string or number",
            ),
            (
                r#"[{"to": "a", "kind": 3}]"#,
                "`relations`, item 1: `kind` must be a non-empty string",
            ),
        ];
        for (relations, reason) in cases {
            let line = format!(r#"{{"id": "k", "text": "", "relations": {relations}}}"#);
            let (sources, problems) = read(&line, Layout::Records);
            assert!(sources.is_empty(), "{line}");
            assert!(
                problems[0].reason.starts_with(reason),
                "{line}: {problems:?}"
            );
            assert_eq!(problems[0].source_id.as_deref(), Some("k"));
        }
        let line =
            r#"{"id": "k", "text": "", "relations": [{"to": 7}, {"to": "b", "kind": "cites"}]}"#;
        let (sources, _) = read(line, Layout::Records);
        assert_eq!(
            sources[0].relations,
            vec![("7".into(), "relates".into()), ("b".into(), "cites".into())]
        );
    }

    #[test]
    fn a_leading_byte_order_mark_is_skipped_and_long_ids_refused() {
        let text = "\u{feff}{\"id\": \"a\", \"text\": \"one\"}\n";
        let (sources, problems) = read(text, Layout::Records);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(sources[0].id, "a");
        let long = format!(
            r#"{{"id": "{}", "text": ""}}"#,
            "x".repeat(MAX_ID_BYTES + 1)
        );
        let (sources, problems) = read(&long, Layout::Records);
        assert!(sources.is_empty());
        assert_eq!(problems[0].reason, "`id` is 4097 bytes long; at most 4096");
    }

    #[test]
    fn empty_text_is_a_source_without_fragments() {
        let (sources, problems) = read(r#"{"id": "e", "text": ""}"#, Layout::Records);
        assert!(problems.is_empty());
        assert!(sources[0].fragments.is_empty());
        assert_eq!(sources[0].envelope.title, "");
    }

    #[test]
    fn duplicate_id_keeps_the_first() {
        let text = "{\"id\": \"a\", \"text\": \"one\"}\n{\"id\": \"b\", \"text\": \"two\"}\n{\"id\": \"a\", \"text\": \"three\"}\n";
        let (sources, problems) = read(text, Layout::Records);
        assert_eq!(sources.len(), 2);
        assert_eq!(sources[0].fragments[0].text, "one");
        assert_eq!(problems[0].place, "in.jsonl:3");
        assert_eq!(problems[0].reason, "duplicate id a (first at line 1)");
        assert_eq!(problems[0].source_id.as_deref(), Some("a"));
    }

    #[test]
    fn non_utf8_line_names_the_file_offset() {
        let mut bytes = b"{\"id\": \"a\", \"text\": \"ok\"}\n".to_vec();
        bytes.extend_from_slice(b"{\"id\": \"b\", \"text\": \"\xff\"}\n");
        let mut problems = Vec::new();
        read_lines(
            &bytes[..],
            "r.jsonl",
            Layout::Records,
            "o",
            &IndexSettings::default(),
            &mut |item| {
                if let Err(p) = item {
                    problems.push(p);
                }
            },
        );
        assert_eq!(problems[0].place, "r.jsonl:2");
        assert_eq!(problems[0].reason, "not valid UTF-8 (byte offset 47)");
    }

    #[test]
    fn beir_lines_use_underscore_id_and_metadata() {
        let text = r#"{"_id": "4983", "title": "White matter", "text": "Alterations of the architecture. More text.", "metadata": {"year": 2002, "authors": ["x"]}}"#;
        let (sources, problems) = read(text, Layout::Beir);
        assert!(problems.is_empty());
        let s = &sources[0];
        assert_eq!(s.id, "4983");
        assert_eq!(s.envelope.title, "White matter");
        assert_eq!(
            s.envelope.extras.get("year").map(String::as_str),
            Some("2002")
        );
        assert!(!s.envelope.extras.contains_key("authors"));
        assert_eq!(
            s.fragments[0].text,
            "Alterations of the architecture. More text."
        );
        assert_eq!(s.summary, "Alterations of the architecture. More text.");
        let (_, problems) = read(r#"{"id": "x", "text": "t"}"#, Layout::Beir);
        assert_eq!(problems[0].reason, "missing `_id` (a string or number)");
    }

    const BAD_VECTOR: &str = "`vector` must be a non-empty array of finite numbers";

    /// A vector's floats as bits, so that -0.0 and 0.0 differ.
    fn bits(v: Option<Vec<f32>>) -> Option<Vec<u32>> {
        v.map(|v| v.iter().map(|x| x.to_bits()).collect())
    }

    /// The line `{"id": "v", "text": "t", "vector": FIELD}` as the parser before the direct
    /// vector read saw it: the whole line a `Value`, each element's `as_f64` cast to `f32`.
    /// The error is the problem's text.
    fn vector_as_value(field: &str) -> Result<Option<Vec<u32>>, String> {
        let line = format!(r#"{{"id": "v", "text": "t", "vector": {field}}}"#);
        let value: Value = serde_json::from_str(&line).map_err(|e| e.to_string())?;
        match &value["vector"] {
            Value::Null => Ok(None),
            Value::Array(items) => items
                .iter()
                .map(|x| x.as_f64().map(|x| x as f32).filter(|x| x.is_finite()))
                .collect::<Option<Vec<f32>>>()
                .filter(|v| !v.is_empty())
                .map(|v| bits(Some(v)))
                .ok_or(BAD_VECTOR.to_string()),
            _ => Err(BAD_VECTOR.to_string()),
        }
    }

    /// The same line through `read_lines`.
    fn vector_read(field: &str) -> Result<Option<Vec<u32>>, String> {
        let line = format!(r#"{{"id": "v", "text": "t", "vector": {field}}}"#);
        match read(&line, Layout::Records) {
            (sources, problems) if problems.is_empty() => Ok(bits(sources[0].vector.clone())),
            (_, problems) => Err(problems[0].reason.clone()),
        }
    }

    /// `vector_read` agrees with `vector_as_value`: the same floats, or a problem where it
    /// failed (the vector problem for a bad vector, a JSON problem for bad JSON).
    fn assert_read_as_before(field: &str) {
        match (vector_as_value(field), vector_read(field)) {
            (Ok(want), Ok(got)) => assert_eq!(got, want, "{field}"),
            (Err(want), Err(got)) if want == BAD_VECTOR => assert_eq!(got, want, "{field}"),
            (Err(want), Err(got)) => {
                let message = want.split(" at line ").next().unwrap_or(&want);
                assert!(
                    got.starts_with(&format!("not valid JSON: {message} (column ")),
                    "{field}: {got} / {want}"
                );
            }
            (want, got) => panic!("{field}: expected {want:?}, read {got:?}"),
        }
    }

    #[test]
    fn vectors_read_as_the_value_tree_read_them() {
        let fields = [
            "[1, -2, 3.5e-3, 0, -0.0, 1e38, -7, 12345678901234567890, 1e-50]",
            "[0.1]",
            "null",
            "[]",
            "\"1 2\"",
            "{}",
            r#"{"a": [1, {"b": 2}]}"#,
            "[1, \"2\"]",
            "[1, null]",
            "[1, [2]]",
            r#"[1, {"a": [1]}]"#,
            "[1e39]",
            "[-1e39, 1]",
            "true",
            "3",
            " [ 0.5 ,\t-0 ,\t-0.0, 1E2, 1e+2, 1e-2, -12.5e-3 ] ",
            "[0.000000000000000001, 0.0000000000000000001, 1e-45, 1.5e-320, 1e-400]",
            "[123456789012345678, 1234567890123456789, -123456789012345678, 18446744073709551616]",
            "[1e308, 1.7976931348623157e308, 1e309, 3.4028235e38, 3.4028236e38]",
            "[1e0001, 1e00001, 1e-0307, 1e-00300]",
            "[5.258834e-33, -6.825219e-33, 4.764025e-8, 1.4e-45, 1.17549435e-38, 123456789e-46]",
            "[1e-300, 9.999999e-308, 18446744073709551615e-308, 1e-308, 1e-309, 1e308]",
            "[01]",
            "[1.]",
            "[.5]",
            "[1e]",
            "[-]",
            "[+1]",
            "[1,]",
            "[1 2]",
            "[1]]",
            "[[1]",
            "[NaN]",
        ];
        for field in fields {
            assert_read_as_before(field);
        }
        // Values the vector read drops are still checked as JSON, as a `Value` checks them.
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        for field in [
            "{\"a\": 1e400}",
            "[1, [1e400]]",
            "[[\"\\ud800\"]]",
            "[1, {\"a\": \"\\udc00x\"}]",
            deep.as_str(),
        ] {
            assert_read_as_before(field);
            assert!(
                vector_read(field)
                    .unwrap_err()
                    .starts_with("not valid JSON"),
                "{field}"
            );
        }
    }

    #[test]
    fn a_bad_vector_names_its_column_in_the_line() {
        for line in [
            r#"{"id": "v", "text": "t", "vector": [1, 2, 1e400], "title": "x"}"#,
            r#"{"id": "v", "vector":  [0.5, [1, "\ud800"]], "text": "t"}"#,
            r#"{"id": "v", "text": "t", "vector": {"a": 1e999}}"#,
        ] {
            let want = serde_json::from_str::<Value>(line).expect_err("bad JSON");
            let (_, problems) = read(line, Layout::Records);
            let message = want.to_string();
            let message = message.split(" at line ").next().unwrap_or(&message);
            assert_eq!(
                problems[0].reason,
                format!("not valid JSON: {message} (column {})", want.column()),
                "{line}"
            );
        }
    }

    #[test]
    fn a_repeated_vector_key_keeps_the_last_and_other_json_is_not_a_record() {
        let line = r#"{"id": "v", "text": "t", "vector": "x", "vector": [2]}"#;
        let (sources, problems) = read(line, Layout::Records);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(sources[0].vector, Some(vec![2.0]));
        let line = r#"{"id": "v", "text": "t", "vector": [2], "vector": []}"#;
        let (_, problems) = read(line, Layout::Records);
        assert_eq!(
            problems[0].reason,
            "`vector` must be a non-empty array of finite numbers"
        );
        for line in [
            "[1, {\"id\": 2}]",
            "\"id\"",
            "3",
            "-3",
            "2.5",
            "null",
            "true",
        ] {
            let (_, problems) = read(line, Layout::Records);
            assert_eq!(
                problems[0].reason, "expected a JSON object with `id` and `text`",
                "{line}"
            );
        }
        let (_, problems) = read(
            r#"{"id": "v", "text": "t", "vector": [1e400]}"#,
            Layout::Records,
        );
        assert!(
            problems[0]
                .reason
                .starts_with("not valid JSON: number out of range"),
            "{}",
            problems[0].reason
        );
        // A non-object line's contents are still checked as JSON.
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        for line in ["[1e400]", "[\"\\ud800\"]", deep.as_str()] {
            let (_, problems) = read(line, Layout::Records);
            assert!(problems[0].reason.starts_with("not valid JSON"), "{line}");
        }
    }

    #[test]
    fn eight_digits_are_read_at_once_and_anything_else_is_not() {
        for text in ["00000000", "12345678", "99999999", "04317826", "100000009x"] {
            let want = text[..8].parse::<u64>().unwrap();
            assert_eq!(eight_digits(text.as_bytes(), 0), Some(want), "{text}");
        }
        for text in [
            "1234567",
            "1234567.",
            "/2345678",
            "1234:678",
            "12 45678",
            "1234567\u{0}",
            "é1234567",
        ] {
            assert_eq!(eight_digits(text.as_bytes(), 0), None, "{text}");
        }
        assert_eq!(eight_digits(b"x12345678", 1), Some(12_345_678));
        assert_eq!(eight_digits(b"x12345678", 2), None);
    }

    #[test]
    fn a_plain_top_level_vector_is_read_ahead_and_anything_else_left_to_serde() {
        let line = r#"{"id": "v", "vector" : [ 0.5,-1e-3 , 2, 0.10000000149011612 ], "text": "t"}"#;
        let Lift::Lifted(rest, floats) = lift_vector(line) else {
            panic!("not read ahead: {line}");
        };
        assert_eq!(rest, r#"{"id": "v", "vector" : null, "text": "t"}"#);
        assert_eq!(floats, vec![0.5, -1e-3, 2.0, 0.1]);
        let kind = |line: &str| match lift_vector(line) {
            Lift::Absent => "absent",
            Lift::Lifted(..) => "lifted",
            Lift::Serde => "serde",
        };
        for (line, want) in [
            (r#"{"vector": [1], "vector": [2]}"#, "serde"),
            (r#"{"vector": null}"#, "serde"),
            (r#"{"vector": []}"#, "serde"),
            (r#"{"vector": [1, "2"]}"#, "serde"),
            (r#"{"vec\u0074or": [1]}"#, "serde"),
            (r#"{"vector": [1e400]}"#, "serde"),
            (r#"{"vector": [1e-309]}"#, "serde"),
            // MiniLM's vectors hold numbers this small in a few columns of every record.
            (
                r#"{"vector": [5.258834e-33, -4.764025e-8, 1e-45, 3.4028235e38]}"#,
                "lifted",
            ),
            (r#"{"vector": [18446744073709551616]}"#, "serde"),
            (r#"{"vector": [01]}"#, "serde"),
            (r#"{"text": "unclosed, "vector": [1]}"#, "serde"),
            (
                r#"{"other": {"vector": [1]}, "x": ["vector", [1]]}"#,
                "absent",
            ),
            (r#"[{"vector": [1]}]"#, "absent"),
            (r#"{"text": "a \"vector\": [1]", "vector": [3]}"#, "lifted"),
        ] {
            assert_eq!(kind(line), want, "{line}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_float_vector_reads_as_the_value_tree_read_it(
            xs in proptest::collection::vec(
                proptest::prop_oneof![
                    8 => proptest::num::f32::ANY
                        .prop_filter("finite", |x| x.is_finite())
                        .prop_map(f64::from),
                    1 => proptest::num::f64::NORMAL,
                    1 => proptest::num::i64::ANY.prop_map(|x| x as f64),
                ],
                1..40,
            ),
            exponent in proptest::bool::ANY,
        ) {
            // f32 values mostly (some that JSON writes as integers), now and then an f64 past
            // f32's range (the vector problem).
            let field = format!(
                "[{}]",
                xs.iter()
                    .map(|x| if exponent { format!("{x:e}") } else { format!("{x}") })
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            assert_read_as_before(&field);
        }

        /// Lines whose top-level vector is read ahead of serde (floats as f32 and f64 print
        /// them, fixed and exponent forms, spaces, keys in any order, look-alike keys in
        /// strings and nested objects, repeated keys) read as the value tree reads them.
        #[test]
        fn vectors_read_ahead_of_serde_read_as_the_value_tree_reads_them(
            xs in proptest::collection::vec(proptest::num::f32::NORMAL, 0..12),
            form in 0..4usize,
            space in proptest::sample::select(vec!["", " ", "\t", " \t \r "]),
            order in 0..4usize,
            decoy in 0..5usize,
            repeat in proptest::bool::ANY,
        ) {
            let numbers = xs
                .iter()
                .map(|&x| match form {
                    0 => format!("{x}"),
                    1 => format!("{}", f64::from(x)),
                    2 => format!("{x:.6}"),
                    _ => format!("{x:e}"),
                })
                .collect::<Vec<_>>()
                .join(&format!("{space},{space}"));
            let vector = format!("\"vector\"{space}:{space}[{space}{numbers}{space}]");
            let decoy = [
                r#""note": "a \"vector\":[1] in text""#,
                r#""other": {"vector": [2, 3]}"#,
                r#""tags": ["vector", "[4]"]"#,
                r#""other": {"vector": "x", "deep": [{"vector": [5]}]}"#,
                r#""title": "v\\""#,
            ][decoy];
            let mut fields = vec![r#""id": "v""#.to_string(), r#""text": "t""#.to_string(), decoy.to_string()];
            fields.insert(order.min(fields.len()), vector.clone());
            if repeat {
                fields.push(r#""vector": [6.5]"#.to_string());
            }
            let line = format!("{{{space}{}{space}}}", fields.join(&format!(",{space}")));
            let value: Value = serde_json::from_str(&line).unwrap();
            let want = value["vector"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().map(|x| x as f32).filter(|x| x.is_finite()))
                .collect::<Option<Vec<f32>>>()
                .filter(|v| !v.is_empty());
            let (sources, problems) = read(&line, Layout::Records);
            match want {
                Some(want) => {
                    proptest::prop_assert!(problems.is_empty(), "{line}: {problems:?}");
                    proptest::prop_assert_eq!(bits(sources[0].vector.clone()), bits(Some(want)), "{}", line);
                }
                None => proptest::prop_assert_eq!(&problems[0].reason, BAD_VECTOR),
            }
        }
    }
}
