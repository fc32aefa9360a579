//! `finder serve` and `finder mcp`: build the spaces from `--index` arguments and hand them to
//! the server crate's HTTP service or MCP loop.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use finder_server::{
    check_bind, parse_space_arg, Access, AfterWrite, App, Limits, McpServer, Models, Opener, Space,
    Spaces,
};

use finder_store::Store;

use crate::{models, store};

/// Spaces from `--index DIR` / `--index NAME=DIR` arguments, over an index folder or the
/// PostgreSQL store its `finder.toml` names. Each opens its store with the embedding model
/// attached, as `finder search` does; `after_write` runs after API writes.
fn spaces(
    args: &[String],
    config: Option<&Path>,
    after_write: Option<AfterWrite>,
) -> Result<Spaces> {
    let models = Arc::new(models::ModelCache::default());
    let for_writes = Arc::clone(&models);
    // The node's vector graphs outlive each reopen of a PostgreSQL space (`storage.node_walk`).
    let node = finder_pg::NodeVectors::default();
    let opener: Opener = Arc::new(move |dir, settings| {
        let mut store = store::open_cached(&models, dir, settings)?;
        if let Store::Postgres(pg) = &mut store {
            if pg.settings().storage.node_walk {
                pg.walk_on_node(&node);
            }
        }
        Ok(store)
    });
    let writes: Models = Arc::new(move |settings| for_writes.get(&settings.embed).ok().flatten());
    let mut list = Vec::new();
    for arg in args {
        let (name, dir) = parse_space_arg(arg);
        // Settings that do not load stop the start, naming the file and the key.
        finder_index::load_settings(&dir, config)?;
        let mut space = Space::new(&name, &dir, config)?
            .with_opener(opener.clone())
            .with_models(writes.clone());
        if let Some(hook) = &after_write {
            space = space.with_after_write(hook.clone());
        }
        list.push(space);
    }
    Ok(Spaces::new(list)?)
}

/// Builds the vectors of documents written through the API, after their lexical commit
/// (which is what the write acknowledged); queries see them once the build publishes.
fn build_vectors_after_writes() -> AfterWrite {
    Arc::new(|dir, settings| {
        // Runs into PostgreSQL embed as they write.
        if settings.storage.backend == finder_core::StorageBackend::Postgres {
            return;
        }
        match models::build(dir, settings) {
            Ok(models::VectorOutcome::Built(_)) | Ok(models::VectorOutcome::Skipped(_)) => {}
            Err(e) => eprintln!("finder serve: building vectors in {}: {e:#}", dir.display()),
        }
    })
}

/// Serves the HTTP API and the search page until Ctrl-C.
pub fn serve(
    index: &[String],
    addr: &str,
    token_file: Option<&Path>,
    config: Option<&Path>,
    watch: Option<crate::watch::Timing>,
) -> Result<()> {
    let spaces = spaces(index, config, Some(build_vectors_after_writes()))?;
    let mut following = Vec::new();
    if let Some(timing) = watch {
        for space in spaces.iter() {
            let line = match crate::watch::follow(space.clone(), timing)
                .with_context(|| format!("space `{}`: following its inputs", space.name()))?
            {
                Some(said) => said,
                None => "has no input folder or file to follow".to_string(),
            };
            following.push(format!("  space {:<10} {line}", space.name()));
        }
    }
    // The token file is read after the spaces are known: a grant of a space that is not
    // served is a mistake worth stopping for.
    let access = match token_file {
        Some(path) => Access::from_file(path, &spaces.names())?,
        None => Access::open(),
    };
    let addrs = check_bind(addr, access.is_guarded())?;
    let mut lines = Vec::new();
    for space in spaces.iter() {
        let state = match space.finder() {
            Ok(finder) => format!("{} sources", finder.status()?.sources()),
            Err(finder_server::ServerError::NotBuilt { .. }) => {
                "no index yet: PUT documents or run `finder index`".to_string()
            }
            Err(e) => return Err(e.into()),
        };
        lines.push(format!(
            "  space {:<10} {}  ({state})",
            space.name(),
            space.dir().display()
        ));
    }
    let guarded = access.is_guarded();
    let app = App::new(spaces, access, Limits::default());
    finder_server::serve_blocking(&addrs, app, |bound| {
        // Written, not printed: a reader that goes away (`finder serve | head -1`) must not
        // take the server down with it.
        let mut out = std::io::stdout().lock();
        let mut say = |line: String| {
            let _ = writeln!(out, "{line}");
        };
        say(format!(
            "Finder is serving at http://{bound}/  (Ctrl-C stops)"
        ));
        for line in lines.iter().chain(&following) {
            say(line.clone());
        }
        if guarded {
            say("  API, MCP and metrics need `Authorization: Bearer <token>`; each token sees only the spaces it is granted".to_string());
        }
        say(format!("  API: http://{bound}/openapi.json"));
        say(format!("  MCP: http://{bound}/mcp"));
        let _ = out.flush();
    })
    .with_context(|| format!("serving on {addr}"))
}

/// Speaks MCP over stdin/stdout until stdin closes.
pub fn mcp(index: &[String], config: Option<&Path>) -> Result<()> {
    let server = McpServer::new(Arc::new(spaces(index, config, None)?));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the MCP runtime")?;
    runtime
        .block_on(server.run_stdio())
        .context("MCP session on stdio")
}
