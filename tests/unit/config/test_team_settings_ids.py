"""Each team's user and group ID: its own, stable, never root, never another team's."""

from __future__ import annotations

import pytest

from eks_gpu_training.config import ConfigError
from eks_gpu_training.config.team_settings import TEAM_GID_DEFAULT_BASE, TEAM_GID_DEFAULT_SPAN, TeamConfig, team_gid, team_id_problems


def team(name: str, **fields) -> TeamConfig:
    return TeamConfig(name=name, namespaces=[name], **fields)


def test_a_teams_default_id_comes_from_its_name_alone():
    derived = team_gid(team("research"))
    assert TEAM_GID_DEFAULT_BASE <= derived < TEAM_GID_DEFAULT_BASE + TEAM_GID_DEFAULT_SPAN
    # Stable whatever the other teams or their order: the files it owns keep the ID.
    assert team_gid(team("research")) == derived
    assert team_gid(team("pretraining")) != derived
    assert team_gid(team("research", gid=20000)) == 20000


def test_an_id_of_root_or_of_an_images_own_users_is_refused():
    for gid in (0, 1000, 9999):
        with pytest.raises(ConfigError, match="TeamConfig.gid: Input should be greater than or equal to 10000"):
            team("research", gid=gid)


def test_two_teams_with_one_id_are_refused_with_the_second_ones_key():
    assert team_id_problems([team("a", gid=20000), team("b", gid=20001)]) == []
    (problem,) = team_id_problems([team("a", gid=20000), team("b", gid=20000)])
    assert (problem.path, problem.message) == (
        "scheduling.teams[1].gid", "20000 is team a's too: its files would be this team's; set a gid of its own, 10000-2000000000")
    (problem,) = team_id_problems([team("a"), team("b", gid=team_gid(team("a")))])
    assert problem.path == "scheduling.teams[1].gid"
