//! Meta's Graph API client: sending messages, template listing and creation, and registering
//! the webhook override of a WhatsApp Business Account. The base URL includes the version
//! (`https://graph.facebook.com/v23.0`); tests point it at the testkit fake.

use std::time::Duration;

use serde_json::{Value, json};

use super::error::{MetaError, MetaErrorKind};

/// A failed Graph call.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum GraphError {
    /// Meta answered with an error.
    #[error(transparent)]
    Api(MetaError),
    /// Meta could not be reached.
    #[error("Meta could not be reached: {0}")]
    Connection(String),
    /// Meta did not answer in time.
    #[error("Meta did not answer within {0} ms")]
    Timeout(u64),
    /// The answer could not be understood.
    #[error("Meta's answer was malformed: {0}")]
    Malformed(String),
}

impl GraphError {
    /// Meta's error code, when Meta gave one.
    pub fn code(&self) -> Option<i64> {
        match self {
            Self::Api(error) => error.code,
            _ => None,
        }
    }

    /// What the failure means for the message: Meta's error by its kind; no answer at all
    /// (unreachable, too slow, unreadable) is transient.
    pub fn kind(&self) -> MetaErrorKind {
        match self {
            Self::Api(error) => error.kind(),
            Self::Connection(_) | Self::Timeout(_) | Self::Malformed(_) => MetaErrorKind::Transient,
        }
    }

    /// Meta's error, or one standing for a call that got no answer from Meta.
    pub fn into_meta(self) -> MetaError {
        match self {
            Self::Api(error) => error,
            other => MetaError {
                code: None,
                message: other.to_string(),
                title: None,
                details: None,
                http_status: None,
            },
        }
    }
}

/// What Meta says of a media id.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct MediaInfo {
    /// Where to download it from, with the channel's token; valid for five minutes.
    pub url: String,
    /// Its MIME type.
    #[serde(default)]
    pub mime_type: Option<String>,
    /// Its SHA-256.
    #[serde(default)]
    pub sha256: Option<String>,
    /// Its size in bytes.
    #[serde(default)]
    pub file_size: Option<u64>,
}

/// Graph API client; cheap to clone.
#[derive(Clone, Debug)]
pub struct GraphClient {
    http: reqwest::Client,
    base_url: String,
    timeout: Duration,
}

impl GraphClient {
    /// A client for `base_url` (version included) with a per-call `timeout`.
    pub fn new(base_url: &str, timeout: Duration) -> Self {
        crate::llm::install_crypto_provider();
        Self {
            http: reqwest::Client::new(),
            base_url: base_url.trim_end_matches('/').to_owned(),
            timeout,
        }
    }

    /// Sends a message (`/messages`, or `/marketing_messages` for marketing templates);
    /// answers the `wamid` Meta accepted it under (accepted, not delivered).
    ///
    /// # Errors
    /// Meta's error, or why Meta could not be asked.
    pub async fn send(
        &self,
        token: &str,
        phone_number_id: &str,
        body: &Value,
        marketing: bool,
    ) -> Result<String, GraphError> {
        let edge = if marketing {
            "marketing_messages"
        } else {
            "messages"
        };
        let answer = self
            .call(
                reqwest::Method::POST,
                &format!("{phone_number_id}/{edge}"),
                token,
                Some(body),
            )
            .await?;
        answer["messages"][0]["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| GraphError::Malformed("no messages[0].id in the answer".to_owned()))
    }

    /// What Meta says of a phone number the token should hold: its display number and the
    /// business's verified name. Succeeding proves the token reaches that number.
    ///
    /// # Errors
    /// Meta's error (190 for a token Meta refuses, 100 for a number it does not hold), or why
    /// Meta could not be asked.
    pub async fn number(&self, token: &str, phone_number_id: &str) -> Result<Value, GraphError> {
        self.call(
            reqwest::Method::GET,
            &format!("{phone_number_id}?fields=id,display_phone_number,verified_name"),
            token,
            None,
        )
        .await
    }

    /// The templates of a WhatsApp Business Account.
    ///
    /// # Errors
    /// Meta's error, or why Meta could not be asked.
    pub async fn list_templates(
        &self,
        token: &str,
        waba_id: &str,
    ) -> Result<Vec<Value>, GraphError> {
        let answer = self
            .call(
                reqwest::Method::GET,
                &format!("{waba_id}/message_templates?limit=250"),
                token,
                None,
            )
            .await?;
        Ok(answer["data"].as_array().cloned().unwrap_or_default())
    }

    /// Submits a template for approval; answers Meta's `{"id","status","category"}`.
    ///
    /// # Errors
    /// Meta's error, or why Meta could not be asked.
    pub async fn create_template(
        &self,
        token: &str,
        waba_id: &str,
        body: &Value,
    ) -> Result<Value, GraphError> {
        self.call(
            reqwest::Method::POST,
            &format!("{waba_id}/message_templates"),
            token,
            Some(body),
        )
        .await
    }

    /// Points the account's webhook at `callback_url` with `verify_token`.
    ///
    /// # Errors
    /// Meta's error, or why Meta could not be asked.
    pub async fn subscribe_app(
        &self,
        token: &str,
        waba_id: &str,
        callback_url: &str,
        verify_token: &str,
    ) -> Result<(), GraphError> {
        let body = json!({"override_callback_uri": callback_url, "verify_token": verify_token});
        self.call(
            reqwest::Method::POST,
            &format!("{waba_id}/subscribed_apps"),
            token,
            Some(&body),
        )
        .await
        .map(|_| ())
    }

    /// What Meta says of a media id: the URL to download it from (valid for five minutes),
    /// its type, digest and size.
    ///
    /// # Errors
    /// Meta's error (100 when it no longer knows the id), or why Meta could not be asked.
    pub async fn media(&self, token: &str, media_id: &str) -> Result<MediaInfo, GraphError> {
        if media_id.is_empty()
            || !media_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
        {
            return Err(GraphError::Malformed(format!(
                "{media_id:?} is not a media id"
            )));
        }
        let answer = self
            .call(reqwest::Method::GET, media_id, token, None)
            .await?;
        serde_json::from_value(answer)
            .map_err(|e| GraphError::Malformed(format!("the media answer: {e}")))
    }

    /// Starts downloading `url` (from [`GraphClient::media`]) with the channel's token: the
    /// answer's head is read within the client's timeout, its body is the caller's to stream.
    ///
    /// # Errors
    /// Meta's status (404 when the URL expired), or why Meta could not be reached.
    pub async fn download(&self, token: &str, url: &str) -> Result<reqwest::Response, GraphError> {
        let timeout_ms = u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX);
        let response =
            tokio::time::timeout(self.timeout, self.http.get(url).bearer_auth(token).send())
                .await
                .map_err(|_| GraphError::Timeout(timeout_ms))?
                .map_err(|e| GraphError::Connection(e.to_string()))?;
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            let text = response.text().await.unwrap_or_default();
            return Err(GraphError::Api(MetaError::bare(status, &text)));
        }
        Ok(response)
    }

    /// Uploads a file of `length` bytes for `phone_number_id` to send (`POST
    /// /{phone-number-id}/media`, multipart); answers Meta's media id. The file streams from
    /// `file`; the wait grows with its size (at least 256 KB/s is expected of the link).
    ///
    /// # Errors
    /// Meta's error (131053 for a file it does not take), or why Meta could not be asked.
    pub async fn upload(
        &self,
        token: &str,
        phone_number_id: &str,
        file: reqwest::Body,
        length: u64,
        mime_type: &str,
        file_name: &str,
    ) -> Result<String, GraphError> {
        let part = reqwest::multipart::Part::stream_with_length(file, length)
            .file_name(file_name.to_owned())
            .mime_str(mime_type)
            .map_err(|e| GraphError::Malformed(format!("the file's type: {e}")))?;
        let form = reqwest::multipart::Form::new()
            .text("messaging_product", "whatsapp")
            .text("type", mime_type.to_owned())
            .part("file", part);
        let request = self
            .http
            .post(format!("{}/{phone_number_id}/media", self.base_url))
            .bearer_auth(token)
            .multipart(form);
        let patience = self.timeout + Duration::from_secs(length / (256 * 1024));
        let answer = self.exchange(request, patience).await?;
        answer["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| GraphError::Malformed("no id in the upload's answer".to_owned()))
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<&Value>,
    ) -> Result<Value, GraphError> {
        let mut request = self
            .http
            .request(method, format!("{}/{path}", self.base_url))
            .bearer_auth(token);
        if let Some(body) = body {
            request = request.json(body);
        }
        self.exchange(request, self.timeout).await
    }

    /// Sends `request` and reads Meta's JSON answer within `patience`; Meta's error, a status
    /// outside 2xx, or an unreadable answer is an error.
    async fn exchange(
        &self,
        request: reqwest::RequestBuilder,
        patience: Duration,
    ) -> Result<Value, GraphError> {
        let timeout_ms = u64::try_from(patience.as_millis()).unwrap_or(u64::MAX);
        let exchange = async {
            let response = request
                .send()
                .await
                .map_err(|e| GraphError::Connection(e.to_string()))?;
            let status = response.status().as_u16();
            let text = response
                .text()
                .await
                .map_err(|e| GraphError::Connection(e.to_string()))?;
            Ok::<_, GraphError>((status, text))
        };
        let (status, text) = tokio::time::timeout(patience, exchange)
            .await
            .map_err(|_| GraphError::Timeout(timeout_ms))??;
        let answer: Value = serde_json::from_str(&text).map_err(|e| {
            GraphError::Malformed(format!(
                "{e}: {}",
                text.chars().take(200).collect::<String>()
            ))
        })?;
        if let Some(error) = answer.get("error") {
            return Err(GraphError::Api(MetaError::from_answer(error, status)));
        }
        if !(200..300).contains(&status) {
            return Err(GraphError::Api(MetaError::bare(status, &text)));
        }
        Ok(answer)
    }
}
