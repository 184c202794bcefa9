"""``engram graph``: relations between memories and the entity graph (issue 20) — thin shells
over the store (``relate``, ``judge_relation``, ``relations_for``, ``graph_ingest``,
``graph_query``, ``graph_relationships``)."""

from __future__ import annotations

import argparse

from engram.cli.common import add_json_flag, emit, open_store, resolve_project, wants_json

RELATIONS_HELP = "supersedes, conflicts_with, related, compatible, scoped, not_conflict"


def register(sub: argparse._SubParsersAction) -> None:
    graph = sub.add_parser(
        "graph",
        help="relations between memories and the graph of what they name",
        description="Relations between memories (supersedes, conflicts_with …) and the entity "
        "graph extracted from them (files, modules, libraries, services, errors, people, "
        "decisions).",
    )
    add_json_flag(graph)
    cmds = graph.add_subparsers(dest="graph_command", metavar="<subcommand>", required=True)

    p = cmds.add_parser(
        "query",
        help="answer a question with triples and their source memories",
        description="Find the entities a question names and the relationships that connect "
        "them, e.g. 'what connects the auth middleware to the session store?'.",
    )
    p.add_argument("question")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--project", help="only this project (default: the directory's)")
    where.add_argument("--all", action="store_true", help="every project")
    p.add_argument("--limit", type=int, default=10, help="triples (default 10, at most 100)")
    add_json_flag(p)
    p.set_defaults(func=cmd_query)

    p = cmds.add_parser(
        "show",
        help="an entity's relationships, or a memory's relations and entities",
        description="NAME: an entity's relationships in the graph. #ID (or a number): a "
        "memory's relations to other memories and the entities it names.",
    )
    p.add_argument("name", help="an entity name, or a memory's #id")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--project", help="only this project (default: the directory's)")
    where.add_argument("--all", action="store_true", help="every project")
    add_json_flag(p)
    p.set_defaults(func=cmd_show)

    p = cmds.add_parser(
        "ingest",
        help="extract entities and relationships from memories",
        description="Without ID: every memory of the project not in the graph as it is now "
        "(--all: of every project). Rules only, unless --llm (needs ANTHROPIC_API_KEY; private "
        "text and secrets never leave the machine).",
    )
    p.add_argument("id", nargs="?", help="one memory's #id")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--project", help="only this project (default: the directory's)")
    where.add_argument("--all", action="store_true", help="every project")
    p.add_argument("--force", action="store_true", help="read every memory again")
    p.add_argument("--llm", action="store_true", help="also ask a model (off by default)")
    add_json_flag(p)
    p.set_defaults(func=cmd_ingest)

    p = cmds.add_parser(
        "relate",
        help="say how one memory relates to another",
        description="SOURCE RELATION TARGET, e.g. `engram graph relate 12 supersedes 7`. A pair "
        "has one relation: relating it again replaces it. Both memories must be in one project.",
    )
    p.add_argument("source", help="#id or sync id")
    p.add_argument("relation", help=RELATIONS_HELP)
    p.add_argument("target", help="#id or sync id")
    p.add_argument("--reason", help="why (shown with the relation)")
    p.add_argument("--status", choices=["judged", "pending", "ignored"], default="judged")
    p.add_argument("--project", help="where to look sync ids up")
    add_json_flag(p)
    p.set_defaults(func=cmd_relate)

    p = cmds.add_parser(
        "judge",
        help="confirm, dismiss or reopen a relation (e.g. a detected conflict)",
        description="STATUS is judged, ignored or pending; --as turns the relation into another "
        "kind (a conflict judged --as supersedes: its source replaces its target).",
    )
    p.add_argument("relation_id", help="the relation's id (rel-…)")
    p.add_argument("status", choices=["judged", "ignored", "pending"])
    p.add_argument("--as", dest="relation", help=RELATIONS_HELP)
    p.add_argument("--reason")
    p.add_argument("--project")
    add_json_flag(p)
    p.set_defaults(func=cmd_judge)

    p = cmds.add_parser("conflicts", help="pending conflicts: memories that need review")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--project", help="only this project (default: the directory's)")
    where.add_argument("--all", action="store_true", help="every project")
    p.add_argument("--limit", type=int, default=50)
    add_json_flag(p)
    p.set_defaults(func=cmd_conflicts)


def _project(args: argparse.Namespace) -> str | None:
    if getattr(args, "all", False):
        return None
    return resolve_project(getattr(args, "project", None)).project or None


def _memory_ref(value: str) -> str | None:
    text = value.strip().removeprefix("#")
    return text if text.isdigit() else None


def cmd_query(args: argparse.Namespace) -> int:
    from engram import formatting

    project = _project(args)
    with open_store() as store:
        answer = store.graph_query(args.question, project=project, limit=args.limit)
    emit(args, formatting.graph_answer(answer), answer.to_dict())
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from engram import formatting

    memory = _memory_ref(args.name)
    with open_store() as store:
        if memory is not None:
            found = store.relations_for(memory)
            graph = store.graph_of_memory(memory)
            lines = [f"#{found.id} {found.title}"]
            lines += formatting.relation_lines(found) or ["No relations to other memories."]
            if graph["entities"]:
                names = ", ".join(f"{e['name']} ({e['kind']})" for e in graph["entities"])
                lines.append(f"Names: {names}")
            lines += [
                f"  {t['subject']} —{t['predicate']}→ {t['object']}" for t in graph["triples"]
            ]
            data = {**found.to_dict(), "graph": graph}
            emit(args, "\n".join(lines), data)
            return 0
        related = store.graph_relationships(args.name, project=_project(args))
    emit(args, formatting.graph_relationships(related), related.to_dict())
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    from engram.cli.progress import factory
    from engram.errors import ValidationError

    extractor = None
    if args.llm:
        from engram.graph.llm import extractor_from_env

        extractor = extractor_from_env()
        if extractor is None:
            raise ValidationError("--llm needs ANTHROPIC_API_KEY (the rules need nothing)")
    project = None if args.id else _project(args)
    with open_store() as store:
        total = 1 if args.id else store.graph_pending(project)
        with factory(quiet=wants_json(args), min_total=200)("Reading memories", total) as step:
            seen = [0]

            def progress(done: int, _total: int) -> None:
                step(done - seen[0])
                seen[0] = done

            report = store.graph_ingest(
                args.id, project=project, force=args.force, extractor=extractor,
                progress=progress,
            )  # fmt: skip
    where = (
        f"project {project!r}" if project else ("#" + str(args.id) if args.id else "every project")
    )
    lines = [
        f"Graph of {where}: {report.memories} memories read, {report.entities} entities, "
        f"{report.relationships} relationships ({report.extractor}, {report.elapsed_ms:.0f} ms)"
    ]
    if report.remaining:
        lines.append(f"{report.remaining} memories still wait to be read.")
    lines += [f"Model error: {e}" for e in report.errors]
    emit(args, "\n".join(lines), report.to_dict())
    return 0


def cmd_relate(args: argparse.Namespace) -> int:
    from engram import formatting

    with open_store() as store:
        rel = store.relate(
            args.source, args.target, args.relation, reason=args.reason, status=args.status,
            kind="human", project=args.project,
        )  # fmt: skip
    emit(args, formatting.relation(rel), rel.to_dict())
    return 0


def cmd_judge(args: argparse.Namespace) -> int:
    from engram import formatting

    with open_store() as store:
        rel = store.judge_relation(
            args.relation_id, args.status, relation=args.relation, reason=args.reason,
            kind="human", project=args.project,
        )  # fmt: skip
    emit(args, formatting.relation(rel), rel.to_dict())
    return 0


def cmd_conflicts(args: argparse.Namespace) -> int:
    from engram import formatting

    project = _project(args)
    with open_store() as store:
        store.detect_conflicts(limit=None)
        found = store.review_queue(project, limit=args.limit)
    if not found:
        text = "No pending conflicts."
    else:
        text = "\n".join(
            [f"{len(found)} pending conflict(s): judge each with engram graph judge <id> ..."]
            + [formatting.relation(r) for r in found]
        )
    emit(args, text, [r.to_dict() for r in found])
    return 0
