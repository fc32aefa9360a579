//! The names of the index folder's parts.

/// Sub-folder of the index folder that holds the tantivy index.
pub(crate) const LEXICAL_DIR: &str = "lexical";

/// The extension of page files.
pub(crate) const PAGES_EXTENSION: &str = "pages";

/// The extension of the postings files.
pub(crate) const POSTINGS_EXTENSION: &str = "fpost";
