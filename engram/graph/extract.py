"""Deterministic entity and relationship extraction: rules only, no model.

From a memory's title and content it finds **entities** — files (``src/auth/session.py``),
modules (``engram.store.search``, "auth middleware"), libraries (Redis, PostgreSQL, from a list
and from ``pip install``/``import`` lines), services ("session store", hosts of URLs), errors
(``TimeoutError``, ``ENOENT``, HTTP 5xx), people (``@alice``, "reviewed by Dana") and decisions
(a ``decision`` memory, or one that says "we decided …") — and **typed relationships** between
entities mentioned next to each other in a sentence, from the words between them ("reads …
from" → ``reads_from``, "depends on" → ``depends_on``, a negation → ``not_uses`` …), or a weak
``related_to`` when nothing says how. Every relationship has a weight: 0.9 when a verb says
it, 0.7 for a library named right before a component ("Redis session store"), 0.5 for what a
decision concerns, 0.4 for plain co-occurrence.

The same text always gives the same graph (no randomness, no clock), which is what lets every
machine derive the same graph from the same memories instead of syncing it.

Size: over 500 lines on purpose: the extraction rules (patterns, word lists, the verb table)
are one small grammar that reads best together; each function is short and pure.
"""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass, field

KINDS = ("file", "module", "library", "service", "error", "person", "decision")
W_VERB, W_ADJACENT, W_DECISION, W_COOCCUR = 0.9, 0.7, 0.5, 0.4
MAX_TEXT = 20_000  # characters of a memory read (the graph is about what it names, early)
MAX_BETWEEN = 80  # characters between two mentions for a verb to relate them
MAX_NAME = 80
MAX_DECISION_LINKS = 12

# --- vocabularies ------------------------------------------------------------------------------

#: Known libraries, tools and platforms: normalized alias → display name.
LIBRARIES: dict[str, str] = {}
for _names in """
PostgreSQL postgres postgresql psql|MySQL mysql|SQLite sqlite sqlite3|Redis redis|MongoDB mongodb mongo
|Elasticsearch elasticsearch|OpenSearch opensearch|Memcached memcached|Kafka kafka|RabbitMQ rabbitmq
|Celery celery|Django django|Flask flask|FastAPI fastapi|Litestar litestar|Starlette starlette
|SQLAlchemy sqlalchemy|Alembic alembic|Pydantic pydantic|msgspec msgspec|orjson orjson|httpx httpx
|requests requests|aiohttp aiohttp|uvicorn uvicorn|gunicorn gunicorn|pytest pytest|Hypothesis hypothesis
|Playwright playwright|Selenium selenium|NumPy numpy|pandas pandas|PyTorch pytorch torch|TensorFlow tensorflow
|scikit-learn scikit-learn sklearn|Textual textual|Rich rich|Click click|Typer typer|Jinja jinja jinja2
|htmx htmx|React react|Vue vue vuejs|Angular angular|Svelte svelte|Next.js next.js nextjs|Node.js node.js nodejs node
|Express express expressjs|TypeScript typescript|JavaScript javascript|Webpack webpack|Vite vite
|Tailwind tailwind tailwindcss|Jest jest|Vitest vitest|ESLint eslint|Prettier prettier|Babel babel
|GraphQL graphql|gRPC grpc|Protobuf protobuf protocol-buffers|OpenAPI openapi|Swagger swagger
|JWT jwt|OAuth oauth oauth2|SAML saml|LDAP ldap|TLS tls ssl|WebSocket websocket websockets
|Docker docker|Kubernetes kubernetes k8s|Helm helm|Terraform terraform|Ansible ansible|Nginx nginx
|Caddy caddy|Traefik traefik|HAProxy haproxy|systemd systemd|AWS aws|S3 s3|Lambda lambda|DynamoDB dynamodb
|SQS sqs|SNS sns|CloudFront cloudfront|GCP gcp|BigQuery bigquery|Azure azure|Cloudflare cloudflare
|Vercel vercel|Heroku heroku|Stripe stripe|Sentry sentry|Datadog datadog|Prometheus prometheus
|Grafana grafana|OpenTelemetry opentelemetry otel|Jaeger jaeger|Git git|GitHub github|GitLab gitlab
|GitHub Actions github-actions|Jenkins jenkins|CircleCI circleci|npm npm|pnpm pnpm|Yarn yarn|pip pip|uv uv
|Poetry poetry|Cargo cargo|Rust rust|Go golang|Python python|Java java|Kotlin kotlin|Ruby ruby|Rails rails
|Spring spring|Laravel laravel|PHP php|Tokio tokio|Serde serde|Prisma prisma|Sequelize sequelize
|TypeORM typeorm|Hibernate hibernate|Supabase supabase|Firebase firebase|Auth0 auth0|Keycloak keycloak
|Okta okta|Vault hashicorp-vault|Consul consul|etcd etcd|ZooKeeper zookeeper|ClickHouse clickhouse
|Snowflake snowflake|Airflow airflow|dbt dbt|Spark spark|Hadoop hadoop|FTS5 fts5|pgvector pgvector
|FAISS faiss|Chroma chroma chromadb|Pinecone pinecone|Weaviate weaviate|Qdrant qdrant|Neo4j neo4j
|OpenAI openai|Anthropic anthropic|Claude claude|Ollama ollama|LangChain langchain|MCP mcp
|Obsidian obsidian|Slack slack|Jira jira|Linear linear|Bazel bazel|Make make|CMake cmake|Gradle gradle
|Maven maven|Bun bun|Deno deno|Electron electron|Tauri tauri|Flutter flutter|Swift swift|Xcode xcode
""".replace("\n", "").split("|"):
    _display, *_aliases = _names.split()
    for _alias in _aliases:
        LIBRARIES[_alias.lower()] = _display
#: Aliases that are also plain English words: a library only when capitalized in the text.
AMBIGUOUS_LIBRARIES = frozenset(
    "requests rich click express node spring rails make lambda vault spark linear chroma "
    "consul swift bun deno go rust uv git".split()
)

#: Component head nouns: ``<modifier…> <head>`` names a module or a service.
MODULE_HEADS = frozenset(
    """middleware module handler controller router layer component manager provider adapter
    repository model view page hook client helper parser serializer validator plugin extension
    package script migration schema table index column form screen widget template config
    function class method decorator library sdk cli command flag setting""".split()
)
SERVICE_HEADS = frozenset(
    """service server api store cache queue database db gateway proxy worker scheduler pipeline
    endpoint bucket cluster daemon job cron backend frontend app stream broker registry storage
    loop bot webhook dashboard""".split()
)
HEADS = MODULE_HEADS | SERVICE_HEADS
#: Words that never start or extend a component's name.
_NOT_MODIFIERS = frozenset(
    """a an the this that these those our your their my its his her we they it i you he she
    and or but nor so yet for of to in on at by from with into onto over under about as is are
    was were be been being has have had do does did not no never new old each every any all
    some same other another more most less one two three first last next own only also then
    than when where which while who whose what why how if because after before until since
    just still even very too via per out up down off again once here there now
    uses use used using reads read writes write calls call stores store saves save loads load
    sends send talks connects connect depends depend needs need requires require returns
    return raises raise throws throw fixes fix fixed caches cache checks check validates
    replaces replaced replace causes caused cause runs run ran wraps wrap imports import
    keeps keep sets set gets get puts put makes make made goes went moved switched migrated
    decided chose picked adopted added removed changed updated created deleted""".split()
)
_NAME_STOP = frozenset(
    """the this that these those we i you they he she it our my your their a an and or but so
    monday tuesday wednesday thursday friday saturday sunday january february march april may
    june july august september october november december today tomorrow yesterday""".split()
)
FILE_EXTENSIONS = (
    "py pyi js mjs cjs ts tsx jsx go rs java kt rb php cs c h cc cpp hpp swift m sql sh bash "
    "zsh ps1 md rst txt json jsonl yaml yml toml ini cfg conf env lock html htm css scss vue "
    "svelte xml csv proto graphql gql tf dockerfile mk gz zip tar"
).split()

# --- patterns ----------------------------------------------------------------------------------

_EXT = "|".join(sorted(FILE_EXTENSIONS, key=len, reverse=True))
_CODE = re.compile(r"`([^`\n]{1,120})`")
_URL = re.compile(r"\bhttps?://([A-Za-z0-9.-]+\.[A-Za-z]{2,})(?::\d+)?(?:/[^\s)>\]]*)?")
_PATH = re.compile(
    rf"(?<![\w/.@-])((?:\.{{0,2}}/)?(?:[\w@.-]+/)+[\w.-]*\w(?:\.(?:{_EXT}))?"
    rf"|[\w-]+(?:\.[\w-]+)*\.(?:{_EXT}))(?![\w/])",
    re.IGNORECASE,
)
_ERROR = re.compile(
    r"\b([A-Z][A-Za-z0-9]*(?:Error|Exception|Timeout|Fault|Panic)|E[A-Z]{3,10}"
    r"|HTTP [45]\d\d|[45]\d\d (?:Not Found|Internal Server Error|Bad Gateway|Bad Request"
    r"|Unauthorized|Forbidden|Service Unavailable|Gateway Timeout|Too Many Requests))\b"
)
_ERROR_PHRASE = re.compile(
    r"\b((?:[a-z][a-z0-9-]+ ){1,2}(?:error|timeout|deadlock|race condition|memory leak|crash"
    r"|regression|panic|outage|leak))\b"
)
_ERROR_HINT = re.compile(r"error|timeout|deadlock|race|leak|crash|regression|panic|outage")
_DOTTED = re.compile(r"(?<![\w.])([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*){1,6})(?![\w.(])")
_MENTION = re.compile(r"(?<![\w@])@([A-Za-z][A-Za-z0-9_-]{1,38})\b")
_PERSON = re.compile(
    r"\b(?:by|from|with|asked|told|per|thanks to|ask|ping|owner:?|reviewer:?|cc:?)\s+"
    r"([A-Z][a-z]{2,}(?: [A-Z][a-z]{2,})?)\b"
)
_INSTALL = re.compile(
    r"\b(?:pip install|pip3 install|uv add|uv pip install|poetry add|npm install|npm i|yarn add"
    r"|pnpm add|cargo add|go get|gem install|brew install)\s+((?:-{1,2}[\w-]+\s+)*)([\w@./-]+)"
)
_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\b|import\s+([\w.]+))", re.MULTILINE)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9+#.-]*[A-Za-z0-9+#]|[A-Za-z]")
_SENTENCE = re.compile(r"(?<=[.!?;:])\s+(?=[A-Z`*@\"'(\[])|\n+")
_DECISION_VERB = re.compile(
    r"\b(?:decided|decide|chose|choose|chosen|picked|went with|go with|switched to|moving to"
    r"|moved to|migrated to|adopted|standardi[sz]ed on|settled on|prefer)\b",
    re.IGNORECASE,
)
_REJECTED = re.compile(r"\b(?:over|instead of|rather than|not)\b", re.IGNORECASE)
_LIST_ONLY = re.compile(r"^[\s,/&+()-]*(?:and|or|vs\.?|versus)?[\s,/&+()-]*$", re.IGNORECASE)
_GOES_ON = re.compile(r"^\s*,?\s*(?:and|then|but|before|after)\s+[a-z]+", re.IGNORECASE)
_NEGATION = re.compile(r"\b(?:not|no longer|never|n't|doesn't|don't|didn't|stopped|without)\b")
#: The words between two mentions → the relationship's predicate (first match wins).
VERBS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        ("found_in", r"^\s+(?:is |are |was )?(?:in|inside|at|under)\s+$"),
        (
            "reads_from",
            r"\b(?:reads?|reading|loads?|fetch(?:es)?|pulls?|gets?|looks? up)\b.*\bfrom\b",
        ),
        (
            "writes_to",
            r"\b(?:writes?|saves?|stores?|persists?|puts?|pushes|records?|logs?)\b.*\b(?:to|in|into)\b",
        ),
        ("depends_on", r"\b(?:depends? on|requires?|needs?|relies on)\b"),
        (
            "connects_to",
            r"\b(?:connects? to|talks? to|communicates? with|sends?\b.*\bto|forwards?\b.*\bto|proxies\b.*\bto|routes?\b.*\bto|points? to)\b",
        ),
        ("calls", r"\b(?:calls?|invokes?|quer(?:y|ies)|hits?|requests?)\b"),
        ("imports", r"\bimports?\b"),
        ("caches", r"\bcach(?:es|ed|e)\b"),
        ("validates", r"\b(?:validates?|checks?|verif(?:y|ies)|authenticates?|authori[sz]es?)\b"),
        (
            "replaces",
            r"\b(?:replac(?:es|ed|e)|supersed(?:es|ed|e)|instead of|switched from|migrated from)\b",
        ),
        (
            "causes",
            r"\b(?:caus(?:es|ed|e)|triggers?|triggered|leads? to|results? in|breaks?|broke)\b",
        ),
        ("fixes", r"\b(?:fix(?:es|ed)?|resolv(?:es|ed|e)|prevents?|works? around)\b"),
        ("raises", r"\b(?:raises?|throws?|fails? with|errors? with)\b"),
        ("runs_on", r"\b(?:runs? on|deployed (?:on|to)|hosted on|backed by|built on|on top of)\b"),
        ("wraps", r"\b(?:wraps?|extends?|subclasses)\b"),
        ("uses", r"\b(?:uses?|using|used|with|via|through|based on|powered by)\b"),
        ("defined_in", r"\b(?:lives?|defined|implemented|located|declared|is) in\b"),
        ("owns", r"\b(?:owns?|maintains?|wrote|authored|reviewed)\b"),
    )
)


# --- results -----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=65_536)
def normalize(name: str) -> str:
    """The key an entity is known by: lowercase, single spaces, no surrounding punctuation,
    the last word singular (``session stores`` and ``Session store`` are one entity)."""
    text = " ".join(name.lower().split()).strip(" .,:;!?'\"()[]{}<>`*_")
    if " " in text or text.isalpha():
        head, _, last = text.rpartition(" ")
        if len(last) > 4 and last.endswith("s") and not last.endswith(("ss", "is", "us")):
            last = last[:-1]
        text = f"{head} {last}" if head else last
    return text[:MAX_NAME]


@dataclass(frozen=True, slots=True)
class Entity:
    name: str
    kind: str
    norm: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.norm:
            object.__setattr__(self, "norm", normalize(self.name))


@dataclass(frozen=True, slots=True)
class Triple:
    subject: Entity
    predicate: str
    object: Entity
    weight: float


@dataclass(slots=True)
class Extraction:
    """What one memory names and says about it (entities deduplicated by their key)."""

    entities: list[Entity] = field(default_factory=list)
    triples: list[Triple] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "entities": [{"name": e.name, "kind": e.kind} for e in self.entities],
            "triples": [
                {
                    "subject": t.subject.name,
                    "predicate": t.predicate,
                    "object": t.object.name,
                    "weight": t.weight,
                }
                for t in self.triples
            ],
        }


@dataclass(frozen=True, slots=True)
class _Mention:
    start: int
    end: int
    entity: Entity


# --- extraction --------------------------------------------------------------------------------


def extract(title: str, content: str, type: str = "", topic_key: str | None = None) -> Extraction:
    """The entities and relationships of one memory (see the module docstring)."""
    del topic_key  # reserved: topic families are not entities (they name memories)
    text = f"{title}.\n{content}"[:MAX_TEXT]
    out = _Builder()
    decision = _decision_entity(title, content, type)
    if decision is not None:
        out.entity(decision)
    for name in _installed(text):
        out.entity(Entity(name, "library"))
    for sentence in _sentences(text):
        mentions = mentions_in(sentence)
        for mention in mentions:
            out.entity(mention.entity)
        _relate(sentence, mentions, out)
        if decision is not None and mentions:
            _decide(sentence, decision, mentions, out)
    if decision is not None:
        for entity in [e for e in out.entities.values() if e != decision][:MAX_DECISION_LINKS]:
            out.triple(decision, "concerns", entity, W_DECISION)
    return out.result()


def question_entities(question: str) -> list[Entity]:
    """Entities a question names (the same rules as for memories)."""
    found: dict[str, Entity] = {}
    for sentence in _sentences(question[:MAX_TEXT]):
        for mention in mentions_in(sentence):
            found.setdefault(mention.entity.norm, mention.entity)
    return list(found.values())


class _Builder:
    def __init__(self) -> None:
        self.entities: dict[str, Entity] = {}
        self.triples: dict[tuple[str, str, str], Triple] = {}

    def result(self) -> Extraction:
        """The extraction, without a weak ``related_to`` where a pair has a stronger link."""
        linked = {frozenset((a, b)) for (a, p, b) in self.triples if p != "related_to"}
        triples = [
            t
            for (a, p, b), t in self.triples.items()
            if p != "related_to" or frozenset((a, b)) not in linked
        ]
        return Extraction(list(self.entities.values()), triples)

    def entity(self, entity: Entity) -> Entity:
        norm = entity.norm
        if not norm:
            return entity
        return self.entities.setdefault(norm, entity)

    def triple(self, subject: Entity, predicate: str, obj: Entity, weight: float) -> None:
        a, b = self.entity(subject), self.entity(obj)
        if a.norm == b.norm or not a.norm or not b.norm:
            return
        key = (a.norm, predicate, b.norm)
        old = self.triples.get(key)
        if old is None or old.weight < weight:
            self.triples[key] = Triple(a, predicate, b, weight)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


def _decision_entity(title: str, content: str, type: str) -> Entity | None:
    name = " ".join(title.split())[:MAX_NAME].rstrip(" .")
    if not name:
        return None
    if type.strip().lower() in ("decision", "adr") or _DECISION_VERB.search(content[:2000]):
        # Known apart from what it is about: a decision titled "Session store" is not the
        # session store.
        return Entity(name, "decision", norm="decision: " + normalize(name))
    return None


def _installed(text: str) -> list[str]:
    """Packages named by install commands and import lines."""
    names = []
    for match in _INSTALL.finditer(text):
        name = match.group(2).strip("./")
        name = re.split(r"[@=<>\[]", name, maxsplit=1)[0] if not name.startswith("@") else name
        if name and len(name) <= 60:
            names.append(LIBRARIES.get(name.lower(), name.lower()))
    for match in _IMPORT.finditer(text):
        module = (match.group(1) or match.group(2) or "").split(".")[0]
        if module and module.lower() in LIBRARIES:
            names.append(LIBRARIES[module.lower()])
    return names


def mentions_in(sentence: str) -> list[_Mention]:
    """The entities a sentence names, in order, never overlapping (earlier rules win)."""
    taken: list[_Mention] = []

    def add(start: int, end: int, entity: Entity) -> None:
        if not entity.norm or any(start < m.end and m.start < end for m in taken):
            return
        taken.append(_Mention(start, end, entity))

    # Cheap substring checks first: most sentences hold no code, URL, path or mention.
    for match in _CODE.finditer(sentence) if "`" in sentence else ():
        inner = match.group(1).strip()
        if inner and not any(c.isspace() for c in inner):  # a command is not a name
            add(match.start(), match.end(), Entity(inner, _code_kind(inner)))
    for match in _URL.finditer(sentence) if "://" in sentence else ():
        add(match.start(), match.end(), Entity(match.group(1).lower(), "service"))
    for match in _ERROR.finditer(sentence):
        add(match.start(1), match.end(1), Entity(match.group(1), "error"))
    for match in _PATH.finditer(sentence) if "/" in sentence or "." in sentence else ():
        value = match.group(1)
        if _looks_like_path(value):
            add(match.start(1), match.end(1), Entity(value, "file"))
    for match in _DOTTED.finditer(sentence) if "." in sentence else ():
        value = match.group(1)
        if not _PATH.fullmatch(value) and not _is_domain(value):
            add(match.start(1), match.end(1), Entity(value, "module"))
    for match in _MENTION.finditer(sentence) if "@" in sentence else ():
        add(match.start(), match.end(), Entity("@" + match.group(1), "person"))
    words = list(_WORD.finditer(sentence))
    for match in words:
        word = match.group(0)
        if word.lower().rstrip(".") in LIBRARIES:
            display = _library(word)
            if display is not None:
                add(match.start(), match.end(), Entity(display, "library"))
    for start, end, name, kind in _components(sentence, words):
        add(start, end, Entity(name, kind))
    lowered = sentence.lower()
    for match in _ERROR_PHRASE.finditer(lowered) if _ERROR_HINT.search(lowered) else ():
        if match.group(1).split()[0] not in _NOT_MODIFIERS:
            add(match.start(1), match.end(1), Entity(match.group(1), "error"))
    for match in _PERSON.finditer(sentence):
        name = match.group(1)
        if name.split()[0].lower() not in _NAME_STOP and _library(name.split()[0]) is None:
            add(match.start(1), match.end(1), Entity(name, "person"))
    return sorted(taken, key=lambda m: m.start)


def _library(word: str) -> str | None:
    key = word.lower().rstrip(".")
    display = LIBRARIES.get(key)
    if display is None:
        return None
    if key in AMBIGUOUS_LIBRARIES and not word[:1].isupper():
        return None
    return display


def _code_kind(inner: str) -> str:
    if _PATH.fullmatch(inner) and _looks_like_path(inner):
        return "file"
    if _library(inner) is not None:
        return "library"
    if _ERROR.fullmatch(inner):
        return "error"
    return "module"


def _looks_like_path(value: str) -> bool:
    """A path has a directory part or a known file extension, and is not a version or a
    sentence's dotted abbreviation."""
    if value.count("/") >= 1 and not value.startswith("//") and not re.fullmatch(r"[\d./]+", value):
        head = value.split("/")[0]
        return bool(head) or value.startswith("/")
    ext = value.rsplit(".", 1)[-1].lower() if "." in value else ""
    return ext in FILE_EXTENSIONS and not re.fullmatch(r"[\d.]+", value)


def _is_domain(value: str) -> bool:
    return value.rsplit(".", 1)[-1] in ("com", "org", "net", "io", "dev", "app", "ai", "co")


def _components(sentence: str, words: list[re.Match[str]]) -> list[tuple[int, int, str, str]]:
    """``<modifier…> <head>`` phrases: up to two modifier words before a component head noun
    ("auth middleware", "user session cache"); ``words`` are the sentence's words."""
    found = []
    for i, match in enumerate(words):
        head = match.group(0).lower()
        singular = head if head in HEADS else head[:-1] if head[-1:] == "s" else ""
        if singular not in HEADS:
            continue
        mods: list[re.Match[str]] = []
        j = i - 1
        while j >= 0 and len(mods) < 2:
            word = words[j].group(0)
            low = word.lower()
            gap = sentence[words[j].end() : (mods[0] if mods else match).start()]
            if gap.strip() not in ("", "-"):
                break
            if (
                low in _NOT_MODIFIERS
                or low.endswith("ly")
                or len(low) < 2
                or not word.replace("-", "").isalpha()
                or _library(word) is not None
            ):
                break
            mods.insert(0, words[j])
            j -= 1
        if not mods:
            continue
        start, end = mods[0].start(), match.end()
        name = " ".join([*(m.group(0).lower() for m in mods), singular])
        kind = "service" if singular in SERVICE_HEADS else "module"
        found.append((start, end, name, kind))
    return found


def _relate(sentence: str, mentions: list[_Mention], out: _Builder) -> None:
    """Relationships between mentions that follow each other in the sentence. A clause that
    goes on with "and <verb>" keeps its subject ("the middleware validates the JWT and loads
    the user from the cache": the middleware loads from the cache)."""
    actor: Entity | None = None
    for left, right in itertools.pairwise(mentions):
        between = sentence[left.end : right.start]
        if len(between) > MAX_BETWEEN:
            actor = None
            continue
        low = f" {between.lower()} "
        subject = left.entity
        if actor is not None and _GOES_ON.match(between):
            subject = actor
        if (
            left.entity.kind == "library"
            and right.entity.kind in ("service", "module")
            and (not between.strip())
        ):
            out.triple(right.entity, "uses", left.entity, W_ADJACENT)  # "Redis session store"
            continue
        if _LIST_ONLY.match(between):
            continue
        for predicate, pattern in VERBS:
            if pattern.search(low):
                if _NEGATION.search(low):
                    predicate = "not_" + predicate
                out.triple(subject, predicate, right.entity, W_VERB)
                actor = subject
                break
        else:
            out.triple(left.entity, "related_to", right.entity, W_COOCCUR)


def _decide(sentence: str, decision: Entity, mentions: list[_Mention], out: _Builder) -> None:
    """In a sentence saying what was decided: what was chosen, and what was not."""
    verb = _DECISION_VERB.search(sentence)
    if verb is None:
        return
    rejected_at = None
    for match in _REJECTED.finditer(sentence, verb.end()):
        rejected_at = match.start()
        break
    for mention in mentions:
        if mention.entity == decision or mention.start < verb.start():
            continue
        if rejected_at is not None and mention.start > rejected_at:
            out.triple(decision, "rejected", mention.entity, W_VERB)
        else:
            out.triple(decision, "chose", mention.entity, W_VERB)
