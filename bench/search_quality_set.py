"""The labelled query set for recall by meaning: a seeded memory and 52 queries.

Invariants:
- ``NOTES`` is a small personal memory (preferences, people, projects, routines),
  every file valid for the real validators.
- Each query in ``QUERIES`` names the one file it is about and its class:
  ``lexical`` (it shares words with the file, as a person who remembers the words
  types) or ``paraphrase`` (it shares no content word with the file, path
  included: no word outside ``search.lexical.STOP_WORDS``, and no two words with the same
  first five letters). ``check()`` proves the paraphrase rule; a test runs it.
- Half the queries are paraphrases.
"""

from __future__ import annotations

import re
from typing import Literal

from memagent.vfs.search.lexical import STOP_WORDS

QueryClass = Literal["lexical", "paraphrase"]

NOTES: dict[str, str] = {
    "/preferences/meeting-notes.md": "Format notes as bullets: decisions first, then action items with owners.\n",
    "/preferences/writing-style.md": "Write in British English, short sentences, no exclamation marks.\n",
    "/preferences/email.md": "Sign off emails with Best; reply within one working day.\n",
    "/preferences/calendar.md": "No calls before 10am; keep Friday afternoons free of meetings.\n",
    "/preferences/coffee.md": "Flat white with oat milk, never sugar.\n",
    "/preferences/travel.md": "Aisle seats, no red-eye flights, Star Alliance for miles.\n",
    "/preferences/code-review.md": "Review pull requests within a day; ask for tests on every bug fix.\n",
    "/people/alice.md": "Alice Martin is head of finance; she prefers spreadsheets over slides.\n",
    "/people/bob.md": "Bob Okafor plays chess on Tuesdays and is allergic to peanuts.\n",
    "/people/carol.md": "Carol owns the brand guidelines and the logo files.\n",
    "/people/dan.md": "Dan is the on-call engineer this week; his pager number is in the rota.\n",
    "/people/erin.md": "Erin joined in March as a data scientist; she mentors the interns.\n",
    "/people/mum.md": "Mum's birthday is 14 May; she likes orchids and crime novels.\n",
    "/projects/apollo.md": "Apollo migrates the billing database to Postgres by March.\n",
    "/projects/zephyr.md": "Zephyr is the mobile app rewrite in Kotlin and Swift.\n",
    "/projects/atlas.md": "Atlas is the internal search service; latency budget 50 ms at p99.\n",
    "/projects/hermes.md": "Hermes sends transactional emails through the queue; retries three times.\n",
    "/projects/orion.md": "Orion dashboards show weekly revenue per region.\n",
    "/home/garden.md": "Water the tomatoes every morning in July; prune the roses in February.\n",
    "/home/car.md": "The car needs winter tyres in November; the garage is Smith Motors.\n",
    "/home/boiler.md": "The boiler service is due in October; the plumber is called Dave.\n",
    "/home/pets.md": "The cat Miso eats wet food at seven; the vet is Dr Patel.\n",
    "/home/recycling.md": "Bins go out on Wednesday night; glass every other week.\n",
    "/home/wifi.md": "The router is in the hall cupboard; restart it when the connection drops.\n",
    "/health/dentist.md": "Dentist check-up every six months at the clinic on Baker Street.\n",
    "/health/running.md": "Marathon training: long run on Sundays, intervals on Wednesdays.\n",
    "/health/sleep.md": "Lights out by eleven; no screens in the bedroom.\n",
    "/health/allergies.md": "Allergic to penicillin; carry antihistamines in spring for hay fever.\n",
    "/finance/taxes.md": "File the tax return before 31 January; keep receipts for deductions.\n",
    "/finance/budget.md": "Monthly budget: rent 1200, groceries 400, savings 500.\n",
    "/finance/insurance.md": "Home insurance renews in August with Aviva; compare quotes first.\n",
    "/finance/pension.md": "Pension contributions are 8 percent, matched by the employer.\n",
    "/knowledge/git.md": "Rebase feature branches; never force-push to main.\n",
    "/knowledge/docker.md": "Docker images go to the internal registry, tagged with the commit.\n",
    "/knowledge/python.md": "Use uv for virtual environments; pin versions in the lock file.\n",
    "/knowledge/sourdough.md": "Feed the starter twice a day; bake at 250 degrees with steam.\n",
    "/knowledge/japanese.md": "Kanji flashcards every evening; JLPT N3 exam in December.\n",
    "/knowledge/piano.md": "Piano practice thirty minutes daily: Bach preludes and scales.\n",
    "/knowledge/books.md": "Reading list: Middlemarch, The Dispossessed, Thinking Fast and Slow.\n",
    "/knowledge/photography.md": "Shoot in RAW; golden hour light is best for portraits.\n",
    "/knowledge/wine.md": "Prefer dry Riesling with spicy food; Rioja with lamb.\n",
    "/knowledge/cycling.md": "Commute by bike when it is dry; the lock code is kept in the password manager.\n",
    "/work/onboarding.md": "New starters get a laptop on day one and a buddy for the first month.\n",
    "/work/expenses.md": "Submit expense claims by the 25th with scanned receipts.\n",
    "/work/holidays.md": "Annual leave is 25 days; book it in the HR portal two weeks ahead.\n",
    "/work/standup.md": "Daily standup at 9:30 on video; fifteen minutes, no laptops open.\n",
    "/work/security.md": "Rotate passwords every quarter and lock the screen when away.\n",
    "/work/deploys.md": "Deploys happen Tuesday and Thursday; never deploy on Friday.\n",
    "/travel/japan-trip.md": "Tokyo trip in April: rail pass, hotel near Shinjuku, visit Kyoto temples.\n",
    "/travel/packing.md": "Packing list: charger, adapter, passport, earplugs, rain jacket.\n",
    "/food/diet.md": "Vegetarian on weekdays; fish on Saturdays.\n",
    "/food/restaurants.md": "Favourite restaurants: Dishoom for breakfast, Padella for pasta.\n",
}

QUERIES: list[tuple[str, str, QueryClass]] = [
    # lexical: the words of the file, as someone who remembers them types
    ("meeting notes format", "/preferences/meeting-notes.md", "lexical"),
    ("British English sentences", "/preferences/writing-style.md", "lexical"),
    ("email sign off", "/preferences/email.md", "lexical"),
    ("Friday afternoons meetings", "/preferences/calendar.md", "lexical"),
    ("oat milk flat white", "/preferences/coffee.md", "lexical"),
    ("aisle seats flights", "/preferences/travel.md", "lexical"),
    ("head of finance", "/people/alice.md", "lexical"),
    ("chess Tuesdays", "/people/bob.md", "lexical"),
    ("brand guidelines logo", "/people/carol.md", "lexical"),
    ("on-call engineer pager", "/people/dan.md", "lexical"),
    ("billing database Postgres", "/projects/apollo.md", "lexical"),
    ("Kotlin Swift rewrite", "/projects/zephyr.md", "lexical"),
    ("search service latency", "/projects/atlas.md", "lexical"),
    ("transactional emails queue", "/projects/hermes.md", "lexical"),
    ("prune the roses", "/home/garden.md", "lexical"),
    ("winter tyres garage", "/home/car.md", "lexical"),
    ("boiler plumber", "/home/boiler.md", "lexical"),
    ("cat wet food vet", "/home/pets.md", "lexical"),
    ("dentist check-up", "/health/dentist.md", "lexical"),
    ("marathon long run", "/health/running.md", "lexical"),
    ("tax return receipts", "/finance/taxes.md", "lexical"),
    ("rebase force-push", "/knowledge/git.md", "lexical"),
    ("sourdough starter", "/knowledge/sourdough.md", "lexical"),
    ("expense claims receipts", "/work/expenses.md", "lexical"),
    ("annual leave HR portal", "/work/holidays.md", "lexical"),
    ("Tokyo rail pass Kyoto", "/travel/japan-trip.md", "lexical"),
    # paraphrase: no content word in common with the file or its path
    ("how do I like my minutes summarised?", "/preferences/meeting-notes.md", "paraphrase"),
    ("when am I unavailable for phone conversations", "/preferences/calendar.md", "paraphrase"),
    ("which espresso drink should I order", "/preferences/coffee.md", "paraphrase"),
    ("who likes numbers in tables rather than presentations", "/people/alice.md", "paraphrase"),
    ("who must avoid nuts", "/people/bob.md", "paraphrase"),
    ("gift ideas for my mother", "/people/mum.md", "paraphrase"),
    ("moving invoices system to a new datastore", "/projects/apollo.md", "paraphrase"),
    ("phone application being rebuilt", "/projects/zephyr.md", "paraphrase"),
    ("sales charts by area", "/projects/orion.md", "paraphrase"),
    ("when to cut back flowers", "/home/garden.md", "paraphrase"),
    ("heating engineer appointment", "/home/boiler.md", "paraphrase"),
    ("what does my kitten eat", "/home/pets.md", "paraphrase"),
    ("rubbish collection day", "/home/recycling.md", "paraphrase"),
    ("internet keeps going down", "/home/wifi.md", "paraphrase"),
    ("teeth cleaning schedule", "/health/dentist.md", "paraphrase"),
    ("bedtime routine", "/health/sleep.md", "paraphrase"),
    ("which antibiotic am I sensitive to", "/health/allergies.md", "paraphrase"),
    ("how much do I spend on housing and shopping", "/finance/budget.md", "paraphrase"),
    ("retirement savings rate", "/finance/pension.md", "paraphrase"),
    ("container publishing conventions", "/knowledge/docker.md", "paraphrase"),
    ("bread baking temperature", "/knowledge/sourdough.md", "paraphrase"),
    ("studying characters for an Asian language test", "/knowledge/japanese.md", "paraphrase"),
    ("keyboard instrument routine", "/knowledge/piano.md", "paraphrase"),
    ("what to drink with curry", "/knowledge/wine.md", "paraphrase"),
    ("what to bring on a journey", "/travel/packing.md", "paraphrase"),
    ("when is shipping code to production allowed", "/work/deploys.md", "paraphrase"),
]

_WORD = re.compile(r"[^\W_]+")


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS}


def shared(query: str, path: str) -> set[str]:
    """The content words ``query`` shares with the file at ``path`` (its text and its path),
    two words counting as one when their first five letters agree."""
    target = _words(NOTES[path] + " " + path)
    stems = {w[:5] for w in target}
    return {w for w in _words(query) if w in target or w[:5] in stems}


def check() -> None:
    """Raise if the set breaks its own rules (see the module docstring)."""
    paraphrases = [q for q in QUERIES if q[2] == "paraphrase"]
    if len(QUERIES) < 50 or 2 * len(paraphrases) < len(QUERIES):
        raise ValueError("the set needs at least 50 queries, half of them paraphrases")
    for query, path, kind in QUERIES:
        if path not in NOTES:
            raise ValueError(f"{query!r} names {path}, which is not in NOTES")
        if kind == "paraphrase" and shared(query, path):
            raise ValueError(f"paraphrase {query!r} shares {sorted(shared(query, path))} with {path}")
        if kind == "lexical" and not shared(query, path):
            raise ValueError(f"lexical query {query!r} shares no word with {path}")
