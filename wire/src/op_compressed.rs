//! `OP_COMPRESSED` (opcode 2012), per the wire compression specification: compressor ids
//! 0 noop, 1 snappy, 2 zlib, 3 zstd.

use std::io::{Read, Write};

use crate::Error;

/// A compressor both sides know by name (`hello.compression`) and by id (`OP_COMPRESSED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compressor {
    /// id 0: the message is carried as is.
    Noop,
    /// id 1: Snappy raw format.
    Snappy,
    /// id 2: zlib (RFC 1950).
    Zlib,
    /// id 3: Zstandard.
    Zstd,
}

impl Compressor {
    /// The compressors Ebb negotiates, in its order of preference.
    pub const NEGOTIABLE: [Compressor; 3] = [Compressor::Zstd, Compressor::Snappy, Compressor::Zlib];

    /// The `OP_COMPRESSED` `compressorId`.
    pub fn id(self) -> u8 {
        match self {
            Compressor::Noop => 0,
            Compressor::Snappy => 1,
            Compressor::Zlib => 2,
            Compressor::Zstd => 3,
        }
    }

    /// Maps a `compressorId` to a compressor.
    pub fn from_id(id: u8) -> Result<Self, Error> {
        match id {
            0 => Ok(Compressor::Noop),
            1 => Ok(Compressor::Snappy),
            2 => Ok(Compressor::Zlib),
            3 => Ok(Compressor::Zstd),
            other => Err(Error::UnknownCompressor(other)),
        }
    }

    /// The name used in `hello`'s `compression` list.
    pub fn name(self) -> &'static str {
        match self {
            Compressor::Noop => "noop",
            Compressor::Snappy => "snappy",
            Compressor::Zlib => "zlib",
            Compressor::Zstd => "zstd",
        }
    }

    /// Maps a `compression` list entry to a compressor.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "noop" => Some(Compressor::Noop),
            "snappy" => Some(Compressor::Snappy),
            "zlib" => Some(Compressor::Zlib),
            "zstd" => Some(Compressor::Zstd),
            _ => None,
        }
    }

    /// Compresses `input`.
    pub fn compress(self, input: &[u8]) -> Result<Vec<u8>, Error> {
        let fail = |e: &dyn std::fmt::Display| Error::Compression(e.to_string());
        match self {
            Compressor::Noop => Ok(input.to_vec()),
            Compressor::Snappy => snap::raw::Encoder::new().compress_vec(input).map_err(|e| fail(&e)),
            Compressor::Zlib => {
                let mut enc = flate2::write::ZlibEncoder::new(
                    Vec::with_capacity(input.len() / 2),
                    flate2::Compression::default(),
                );
                enc.write_all(input).map_err(|e| fail(&e))?;
                enc.finish().map_err(|e| fail(&e))
            }
            Compressor::Zstd => zstd::bulk::compress(input, 0).map_err(|e| fail(&e)),
        }
    }

    /// Decompresses `input`, which must expand to exactly `size` bytes. `size` was checked
    /// against the message limit by the caller, so at most `size` bytes are ever allocated.
    pub fn decompress(self, input: &[u8], size: usize) -> Result<Vec<u8>, Error> {
        let fail = |e: &dyn std::fmt::Display| Error::Decompression(e.to_string());
        let out = match self {
            Compressor::Noop => input.to_vec(),
            Compressor::Snappy => {
                let len = snap::raw::decompress_len(input).map_err(|e| fail(&e))?;
                if len != size {
                    return Err(Error::Decompression(format!(
                        "snappy block holds {len} bytes, {size} announced"
                    )));
                }
                let mut out = vec![0; size];
                snap::raw::Decoder::new().decompress(input, &mut out).map_err(|e| fail(&e))?;
                out
            }
            Compressor::Zlib => {
                let mut out = Vec::with_capacity(size);
                // One byte more than announced is read so that an oversized stream is caught.
                flate2::read::ZlibDecoder::new(input)
                    .take(size as u64 + 1)
                    .read_to_end(&mut out)
                    .map_err(|e| fail(&e))?;
                out
            }
            Compressor::Zstd => zstd::bulk::decompress(input, size).map_err(|e| fail(&e))?,
        };
        if out.len() != size {
            return Err(Error::Decompression(format!(
                "expanded to {} bytes, {size} announced",
                out.len()
            )));
        }
        Ok(out)
    }
}
