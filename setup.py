"""Installs llmbook from settings.ini (nbdev 2's layout): `pip install -e .`, or `.[dev]` for the tools."""
from configparser import ConfigParser
import setuptools

cfg = ConfigParser(delimiters=['='])
cfg.read('settings.ini', encoding='utf-8')
cfg = cfg['DEFAULT']

setuptools.setup(
    name=cfg['lib_name'],
    version=cfg['version'],
    description=cfg['description'],
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    author=cfg['author'],
    author_email=cfg['author_email'],
    url=cfg['git_url'],
    license='Apache-2.0',
    keywords=cfg['keywords'].split(),
    python_requires='>=' + cfg['min_python'],
    packages=setuptools.find_packages(include=['llmbook', 'llmbook.*']),
    include_package_data=True,
    package_data={'llmbook': ['webui/*.html']},   # the chat page of `llmbook serve`
    install_requires=cfg['requirements'].split(),
    extras_require={'dev': cfg['dev_requirements'].split(), 'serve': cfg['serve_requirements'].split()},
    entry_points={
        'console_scripts': cfg['console_scripts'].split(),
        'nbdev': [f"{cfg['lib_path']}={cfg['lib_path']}._modidx:d"],
    },
    classifiers=['Programming Language :: Python :: 3', 'License :: OSI Approved :: Apache Software License',
                 'Topic :: Scientific/Engineering :: Artificial Intelligence'],
    project_urls={'Documentation': cfg['doc_host'] + cfg['doc_baseurl'], 'Source': cfg['git_url']},
    zip_safe=False,
)
