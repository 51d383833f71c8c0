//! Transcribing audio through the OpenAI-compatible `POST {base}/audio/transcriptions`
//! (multipart: the file and the model; the answer's `text`), for assistants that take voice
//! notes as words.

use bytes::Bytes;
use serde_json::Value;

use super::client::LlmClient;
use super::types::LlmError;

impl LlmClient {
    /// What the audio `file` (of type `mime_type`) says. One attempt: a voice note that cannot
    /// be transcribed now is described instead, and the turn goes on.
    ///
    /// # Errors
    /// [`LlmError::NotConfigured`] without a model; the endpoint's refusal, a timeout, or an
    /// answer without `text`.
    pub async fn transcribe(&self, file: Bytes, mime_type: &str) -> Result<String, LlmError> {
        let base = self
            .config
            .base_url
            .as_deref()
            .ok_or(LlmError::NotConfigured)?;
        let url = format!("{}/audio/transcriptions", base.trim_end_matches('/'));
        let part = reqwest::multipart::Part::stream(reqwest::Body::from(file))
            .file_name(format!("audio.{}", extension(mime_type)))
            .mime_str(mime_type)
            .map_err(|e| LlmError::Malformed(format!("the audio's type: {e}")))?;
        let form = reqwest::multipart::Form::new()
            .part("file", part)
            .text("model", self.config.transcription_model.clone())
            .text("response_format", "json");
        let mut builder = self.http.post(url).multipart(form);
        if let Some(key) = &self.config.api_key {
            builder = builder.bearer_auth(key);
        }
        let response = self.send(builder).await?;
        let body: Value = tokio::time::timeout(self.config.timeout, response.json())
            .await
            .map_err(|_| self.timeout_error())?
            .map_err(|e| LlmError::Malformed(e.to_string()))?;
        body["text"]
            .as_str()
            .map(|text| text.trim().to_owned())
            .ok_or_else(|| LlmError::Malformed("the transcription has no text".to_owned()))
    }
}

/// The file extension the endpoint recognises the audio by.
fn extension(mime_type: &str) -> &'static str {
    let essence = mime_type.split(';').next().unwrap_or_default().trim();
    match essence {
        "audio/ogg" | "audio/opus" => "ogg",
        "audio/mpeg" | "audio/mp3" => "mp3",
        "audio/mp4" | "audio/m4a" | "audio/x-m4a" => "m4a",
        "audio/aac" => "aac",
        "audio/amr" => "amr",
        "audio/wav" | "audio/x-wav" => "wav",
        "audio/webm" => "webm",
        _ => "bin",
    }
}
