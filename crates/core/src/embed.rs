//! The seam between the pipeline and embedding backends: anything that turns texts into
//! L2-normalised vectors. Backends live in `finder-embed`; tests use small fakes.

/// An embedding model. Implementations must return one normalised vector per text.
pub trait Embed: Send + Sync {
    /// Names the model and its settings; vectors made by different ids are never mixed.
    fn model_id(&self) -> &str;
    fn dim(&self) -> usize;
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String>;
}
