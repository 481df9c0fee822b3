import json

from zoo.cli import main


def test_list_and_info(capsys):
    assert main(["list", "ff_*"]) == 0
    assert capsys.readouterr().out.split() == ["ff_t2t_7", "ff_vit_base", "ff_vit_micro", "ff_vit_mini", "ff_vit_small",
                                                  "ff_vit_tiny"]
    assert main(["info", "ea_vit_micro", "--args", '{"img_size": 32, "num_classes": 10}']) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["mixer"] == "ea" and info["embed_dim"] == 64 and info["params"] > 0


def test_unknown_name_is_an_error_with_matches(capsys):
    assert main(["info", "ea_vit_tny"]) == 2
    assert "ea_vit_tiny" in capsys.readouterr().err
